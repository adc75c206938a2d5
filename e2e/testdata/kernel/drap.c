// drap: a function that realigns its stack and allocates on it (alloca),
// which gcc compiles with a DRAP register: its CFA is then *(rbp-8), a rule
// only an SFrame V3 flexible FDE can say, and it saves rbp at rbp+0. Built
// static with -O2 -fomit-frame-pointer for scripts/kernel-acceptance.sh.
//
// Two phases, told apart by the innermost function of a sample:
//   leaf d3 drapfn d2 d1 main __libc_start_call_main __libc_start_main _start
//   drapfn d2 d1 main __libc_start_call_main __libc_start_main _start
// (in the second, drapfn spins in its own frame, the topmost one).
#include <alloca.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile unsigned long sink;
unsigned long iterations = 200000000;

NOINLINE void leaf(void)
{
	for (unsigned long i = 0; i < iterations; i++)
		sink += i;
}

NOINLINE int d3(int x)
{
	leaf();
	return x + (int)sink;
}

NOINLINE int drapfn(int n)
{
	volatile char aligned[64] __attribute__((aligned(32)));
	volatile char *p = alloca(n + 16);
	aligned[n & 63] = (char)n;
	p[n] = (char)n;
	int r = d3(n + aligned[n & 63]);
	for (unsigned long i = 0; i < iterations; i++)
		sink += i ^ (unsigned long)p[n];
	return r + p[n] + aligned[3];
}

NOINLINE int d2(int x)
{
	int r = drapfn(x + 100);
	sink += r;
	return r - 1;
}

NOINLINE int d1(int x)
{
	return d2(x) * 7 + 1;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		iterations = strtoul(argv[1], NULL, 0);
	return d1(argc) == 0x12345 ? 1 : 0;
}
