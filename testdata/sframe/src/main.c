/* The entry point of the linked fixture executables: calls into the shared
 * library through the executable's PLT. */

extern int lib_entry(int);
extern int leaf(int, int);

int entry(long argc)
{
	return lib_entry((int)argc) + leaf((int)argc, 2);
}
