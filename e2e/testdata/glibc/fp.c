// fp_level: the frame-pointer levels of the glibc harness's program (main.c),
// built with -fno-omit-frame-pointer.
int nofp_level(int n);
__attribute__((noinline)) int fp_level(int n)
{
	int r = n ? fp_level(n - 1) : nofp_level(3);
	__asm__ volatile("" ::: "memory");
	return r + n;
}
