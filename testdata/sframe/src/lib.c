/* A shared library whose calls to undefined functions go through the PLT.
 * ../build.sh links it with lazy binding, -z now and -z ibtplt. */

extern int ext_a(int);
extern int ext_b(int);
extern int ext_c(int);

int lib_entry(int x)
{
	return ext_a(x) + ext_b(x + 1) * ext_c(x + 2);
}

int lib_second(int x)
{
	return ext_c(ext_a(x));
}

/* Called by the fixture objects built from common.c; defined here so the
 * executables link. Calls between them go through the PLT as well. */
int ext_value(int x)
{
	return ext_b(x) ^ x;
}

void sink(volatile void *p, int n)
{
	((volatile char *)p)[0] = (char)n;
}
