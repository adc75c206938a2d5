// libchain: the library half of dyn's call chains, for
// scripts/kernel-acceptance.sh. Built as a shared library with -O2
// -fomit-frame-pointer -fPIC, so that only SFrame (or DWARF) can walk it.
// Every function is kept out of line and does work after its call (no
// tail calls).
//
// dyn (the program) calls lib_l1, which calls back into the program (p2),
// which calls lib_l2, whose callee lib_leaf spins: library and program
// frames alternate. lib_sort calls libc's qsort, whose comparator lib_cmp
// spins: libc's sorting functions lie between two frames of this library.
// The true chains are in dyn.c.
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile unsigned long lib_sink;
static unsigned long cmp_spin;

NOINLINE void lib_leaf(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		lib_sink += i;
}

NOINLINE int lib_l2(int x, unsigned long n)
{
	volatile char mid[3000]; // a CFA offset of 2 bytes
	mid[x & 1023] = (char)x;
	lib_leaf(n);
	return mid[x & 1023] + (int)lib_sink;
}

NOINLINE int lib_l1(int x, int (*back)(int))
{
	// Values live across the call: callee-saved registers are pushed.
	int a = x * 3, b = x ^ 7, c = x + 11;
	int r = back(a + b);
	return r + a + b + c;
}

static NOINLINE int lib_cmp(const void *p, const void *q)
{
	long a = *(const long *)p, b = *(const long *)q;
	for (unsigned long i = 0; i < cmp_spin; i++)
		lib_sink += i;
	return (a > b) - (a < b);
}

NOINLINE long lib_sort(long *v, size_t n, unsigned long spin)
{
	cmp_spin = spin;
	qsort(v, n, sizeof(*v), lib_cmp);
	lib_sink += (unsigned long)v[0];
	return v[0] + v[n - 1];
}
