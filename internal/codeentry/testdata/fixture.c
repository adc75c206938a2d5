/* The program the tests build in several ways (PIE, non-PIE, one section
   per function, x86-64 and AArch64) and strip, to find its functions
   again. Each function is reached the way one source finds it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reached by direct calls only. */
__attribute__((noinline)) static int helper(int x) { return x * 3 + 1; }
__attribute__((noinline)) static int twice(int x) { return helper(x) + helper(x + 1); }

/* Reached only through a table of pointers (a vtable's shape). */
__attribute__((noinline)) static int op_add(int x) { return x + 7; }
__attribute__((noinline)) static int op_mul(int x) { return x * 7; }
__attribute__((noinline)) static int op_neg(int x) { return -x; }
struct ops { int (*f[3])(int); };
static const struct ops table = {{op_add, op_mul, op_neg}};
int (*volatile hook)(int) = op_neg;

/* Split by GCC: the unlikely path goes to work.cold, entered by a jump. */
__attribute__((noinline)) int work(int n, const char *s) {
	int acc = 0;
	if (__builtin_expect(n < 0, 0)) {
		fprintf(stderr, "negative %d for %s\n", n, s);
		fflush(stderr);
		abort();
	}
	for (int i = 0; i < n; i++)
		acc += table.f[i % 3](i) + twice(i);
	if (__builtin_expect(acc == 12345, 0)) {
		fprintf(stderr, "unlucky %s\n", s);
		exit(3);
	}
	return acc;
}

__attribute__((cold, noinline)) static void fail(const char *m) {
	fputs(m, stderr);
	exit(2);
}

static char buf[64];

__attribute__((noinline)) static int check(const char *s) {
	char local[32];
	strncpy(local, s, sizeof local - 1);
	local[sizeof local - 1] = 0;
	if (strlen(local) > 20)
		fail("long\n");
	return (int)strlen(local);
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 3;
	snprintf(buf, sizeof buf, "%s", argv[0]);
	printf("%d %d %d\n", work(n, buf), check(buf), hook(n));
	return 0;
}
