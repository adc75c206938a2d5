/* End-to-end test program: recursion, variable-length arrays, a signal
   handler, calls through a shared library (PLT), setjmp, a large frame. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lib_apply(int (*fn)(int), int x);
int lib_sum(int n);

static jmp_buf env;
static volatile sig_atomic_t got;

static void on_signal(int sig) { got = sig; }

static int vla(int n) {
	char buf[n + 1];
	memset(buf, n & 0x7f, n + 1);
	return n <= 1 ? 1 : (buf[n / 2] + vla(n - 1)) % 1000003;
}

static int big_frame(int k) {
	volatile char big[200000];
	big[k] = (char)k;
	big[199999 - k] = 1;
	return big[k] + big[199999 - k];
}

static int twice(int x) { return 2 * x; }

/* A function of more than 64 KiB of code (4-byte FRE start offsets). */
#define R4(x) x x x x
#define R16(x) R4(R4(x))
#define R4096(x) R16(R16(R16(x)))
static int __attribute__((noinline)) huge(int n) {
	volatile int v = n;
	R4096(v = v * 3 + 1; v ^= v >> 3;)
	return v & 0xffff;
}

int main(int argc, char **argv) {
	(void)argv;
	signal(SIGUSR1, on_signal);
	raise(SIGUSR1);
	int r = 0;
	if (setjmp(env) == 0)
		r = vla(argc + 40);
	printf("vla %d big %d lib %d %d signal %d huge %d\n", r, big_frame(argc + 3), lib_apply(twice, 21), lib_sum(10), (int)got, huge(argc));
	return 0;
}
