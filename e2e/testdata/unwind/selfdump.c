/* Samples its own stack: an interval timer interrupts a CPU loop
   (main -> level1 -> with_alloca -> lib_mid -> lib_leaf, the last two in
   an -fomit-frame-pointer library) and the SIGALRM handler appends to the
   file named by argv[1], per sample: "SAMPLE" pc sp fp lr (8-byte words),
   the length and text of /proc/self/maps, the stack mapping's end, and the
   stack from the interrupted SP to that end, in the machine's byte order
   (lr is r14 on s390x). Used for AArch64 and s390x under qemu, where gdb
   cannot show the mappings. */
#define _GNU_SOURCE
#include <alloca.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

extern long lib_mid(long);
extern volatile long sink;

static int out = -1;
static volatile int samples;
static char maps[65536];

static uint64_t hex(const char **p)
{
	uint64_t v = 0;
	for (;; (*p)++) {
		char c = **p;
		if (c >= '0' && c <= '9') v = v * 16 + (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f') v = v * 16 + (uint64_t)(c - 'a' + 10);
		else return v;
	}
}

static void handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si;
	if (samples >= 40)
		return;
	ucontext_t *uc = ctx;
	uint64_t w[4];
#if defined(__aarch64__)
	w[0] = uc->uc_mcontext.pc; w[1] = uc->uc_mcontext.sp;
	w[2] = uc->uc_mcontext.regs[29]; w[3] = uc->uc_mcontext.regs[30];
#elif defined(__s390x__)
	w[0] = uc->uc_mcontext.psw.addr; w[1] = uc->uc_mcontext.gregs[15];
	w[2] = uc->uc_mcontext.gregs[11]; w[3] = uc->uc_mcontext.gregs[14];
#else
	w[0] = uc->uc_mcontext.gregs[REG_RIP]; w[1] = uc->uc_mcontext.gregs[REG_RSP];
	w[2] = uc->uc_mcontext.gregs[REG_RBP]; w[3] = 0;
#endif
	int fd = open("/proc/self/maps", O_RDONLY);
	uint64_t n = 0;
	for (ssize_t r; fd >= 0 && n < sizeof maps - 1 && (r = read(fd, maps + n, sizeof maps - 1 - n)) > 0;)
		n += (uint64_t)r;
	if (fd >= 0) close(fd);
	maps[n] = 0;
	uint64_t end = 0;
	for (const char *p = maps; *p;) {
		uint64_t lo = hex(&p);
		p++;
		uint64_t hi = hex(&p);
		if (lo <= w[1] && w[1] < hi) end = hi;
		while (*p && *p != '\n') p++;
		if (*p) p++;
	}
	if (!end)
		return;
	write(out, "SAMPLE\0\0", 8);
	write(out, w, sizeof w);
	write(out, &n, 8);
	write(out, maps, n);
	write(out, &end, 8);
	write(out, (void *)w[1], end - w[1]);
	samples++;
}

__attribute__((noinline)) long with_alloca(long n)
{
	char *p = alloca(n);
	memset(p, 1, n);
	long r = 0;
	while (samples < 40)
		r += lib_mid(p[n - 1] + 3000);
	return r + p[0];
}

__attribute__((noinline)) long level1(long n)
{
	return with_alloca(n + 16) + 1;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0)
		return 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGALRM, &sa, 0);
	struct itimerval it = {{0, 3000}, {0, 3000}};
	setitimer(ITIMER_REAL, &it, 0);
	sink = level1(argc * 10);
	return 0;
}
