// chain: a deep call chain whose innermost function spins, for
// scripts/kernel-acceptance.sh. Built static with -O2 -fomit-frame-pointer,
// so that only SFrame (or DWARF) can walk it. Every function is kept out of
// line and does work after its call (no tail calls), and the frames differ:
// no locals, register saves, 1-byte, 2-byte and 4-byte CFA offsets.
//
// The true chain of a sample in leaf, innermost first:
//   leaf c8 c7 c6 c5 c4 c3 c2 c1 main __libc_start_call_main
//   __libc_start_main _start
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile unsigned long sink;
unsigned long iterations = 400000000;

NOINLINE void leaf(void)
{
	for (unsigned long i = 0; i < iterations; i++)
		sink += i;
}

NOINLINE int c8(int x)
{
	leaf();
	return x + (int)sink;
}

NOINLINE int c7(int x)
{
	volatile char small[40];
	small[0] = (char)x;
	int r = c8(x + 1);
	return r + small[0];
}

NOINLINE int c6(int x, int y)
{
	// Values live across the call: callee-saved registers are pushed.
	int a = x * 3, b = y * 5, c = x ^ y, d = x + y, e = x - y, f = x * y;
	int r = c7(a + b);
	return r + a + b + c + d + e + f;
}

NOINLINE int c5(int x)
{
	volatile char mid[3000]; // a CFA offset of 2 bytes
	mid[x & 1023] = (char)x;
	int r = c6(x, mid[x & 1023]);
	return r + mid[7];
}

NOINLINE int c4(int x)
{
	volatile char big[80000]; // a CFA offset of 4 bytes
	big[x & 4095] = (char)x;
	int r = c5(x + big[x & 4095]);
	return r + big[11];
}

NOINLINE int c3(int x)
{
	return c4(x) * 3 + 1;
}

NOINLINE int c2(int x)
{
	int r = c3(x + 2);
	sink += r;
	return r - 1;
}

NOINLINE int c1(int x)
{
	return c2(x) + 5;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		iterations = strtoul(argv[1], NULL, 0);
	return c1(argc) == 0x12345 ? 1 : 0;
}
