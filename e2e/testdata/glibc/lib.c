// lib_level: libdeep.so of the glibc harness's program (main.c), built
// -fPIC -shared -fomit-frame-pointer.
__attribute__((noinline)) int lib_level(int n, int (*cb)(void))
{
	int r = n ? lib_level(n - 1, cb) : cb();
	__asm__ volatile("" ::: "memory");
	return r + 2 * n;
}
