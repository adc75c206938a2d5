/* Built -O2 -fomit-frame-pointer -fPIC -shared: frames without a frame
   pointer; lib_mid calls lib_leaf through the library's own PLT (lib_leaf
   is interposable). */
volatile long sink;

__attribute__((noinline)) long lib_leaf(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i * sink;
	return s;
}

__attribute__((noinline)) long lib_mid(long n)
{
	long r = lib_leaf(n) * 3;
	sink += r;
	return r + 1;
}

/* Called through the program's PLT in a tight loop, so that samples land
   in the PLT stub. */
__attribute__((noinline)) long lib_tiny(long n)
{
	return n + 1;
}
