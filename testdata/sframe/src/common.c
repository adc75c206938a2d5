/* Portable functions for SFrame fixtures: each exercises one shape of
 * call-frame information. Built at several optimisation levels and with and
 * without a frame pointer by ../build.sh. */

extern void sink(volatile void *p, int n);
extern int ext_value(int x);

/* A leaf: no stack adjustment at -O2; a frame-pointer frame at -O0. */
int leaf(int a, int b)
{
	return a * b + 3;
}

/* A non-leaf with callee-saved registers. */
int caller(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += ext_value(i) * n;
	return s + ext_value(s);
}

/* A frame over 255 bytes: SFrame data words of 2 bytes. */
int frame_300(int n)
{
	volatile char buf[300];
	buf[n] = 1;
	sink(buf, n);
	return buf[0];
}

/* A frame over 32 KiB: SFrame data words of 4 bytes. */
int frame_70000(int n)
{
	volatile char buf[70000];
	buf[n] = 1;
	sink(buf, n);
	return buf[0];
}

/* A body over 256 bytes, so the epilogue's row starts past offset 255:
 * FRE start addresses of 2 bytes. */
#define STEP(k) v = v * (k) + ext_value(v ^ (k));
int long_body(int v)
{
	STEP(3) STEP(5) STEP(7) STEP(11) STEP(13) STEP(17) STEP(19) STEP(23)
	STEP(29) STEP(31) STEP(37) STEP(41) STEP(43) STEP(47) STEP(53) STEP(59)
	STEP(61) STEP(67) STEP(71) STEP(73) STEP(79) STEP(83) STEP(89) STEP(97)
	volatile char pad[64];
	sink(pad, v);
	return v;
}
