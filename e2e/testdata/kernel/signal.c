// signal: a program that spins in its own call chain, then sends itself a
// signal whose handler spins too, for scripts/kernel-acceptance.sh. Built
// static with -O2 -fomit-frame-pointer.
//
// Told apart by the innermost function of a sample:
//   s3 s2 s1 main __libc_start_call_main __libc_start_main _start
//   hleaf h1 handler __restore_rt [kill s3 s2 s1 main ...]
// The second chain crosses the kernel's signal frame: the interrupted
// frames after __restore_rt (kill, called from s3) are only reachable by
// an unwinder that reads the saved registers of that frame.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile unsigned long sink;
unsigned long iterations = 200000000;

NOINLINE void hleaf(void)
{
	for (unsigned long i = 0; i < iterations; i++)
		sink += i;
}

NOINLINE int h1(int x)
{
	hleaf();
	return x + (int)sink;
}

NOINLINE void handler(int sig)
{
	sink += (unsigned long)h1(sig);
}

NOINLINE int s3(int x)
{
	for (unsigned long i = 0; i < iterations; i++)
		sink += i * 3;
	kill(getpid(), SIGUSR1);
	return x + (int)sink;
}

NOINLINE int s2(int x)
{
	int r = s3(x * 2);
	sink += r;
	return r + 3;
}

NOINLINE int s1(int x)
{
	return s2(x) - 4;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {0};
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		return 2;
	if (argc > 1)
		iterations = strtoul(argv[1], NULL, 0);
	return s1(argc) == 0x12345 ? 1 : 0;
}
