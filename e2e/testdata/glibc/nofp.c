// nofp_level: the levels of the glibc harness's program (main.c) built with
// -fomit-frame-pointer.
int alloca_level(int n);
__attribute__((noinline)) int nofp_level(int n)
{
	int r = n ? nofp_level(n - 1) : alloca_level(5);
	__asm__ volatile("" ::: "memory");
	return r * 3 + n;
}
