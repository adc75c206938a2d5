/* Built without unwind tables and without frame pointers, as C++ in
 * browsers is: only --from-code can describe it. */
long asm_realign(long n);
long asm_pushes(long n);

__attribute__((noinline)) static long lib_inner(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += asm_realign(64) ^ asm_pushes(8);
	return s;
}

__attribute__((noinline)) long lib_work(long n)
{
	volatile long k = n;
	return lib_inner(k) + 1;
}
