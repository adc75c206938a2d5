// uapi: prints the bit positions of defer_callchain and defer_output in
// perf_event_attr's flags word, as the <linux/perf_event.h> it is compiled
// against has them, for scripts/kernel-acceptance.sh, which compiles it
// against the kernel tree's UAPI header: the reader sets the two bits by
// position (38 and 39).
#include <stdio.h>
#include <string.h>
#include <linux/perf_event.h>
int main(void)
{
	struct perf_event_attr a;
	unsigned long long *flags = (unsigned long long *)((char *)&a.read_format + sizeof(a.read_format));
	memset(&a, 0, sizeof(a));
	a.defer_callchain = 1;
	printf("%d ", __builtin_ctzll(*flags));
	memset(&a, 0, sizeof(a));
	a.defer_output = 1;
	printf("%d\n", __builtin_ctzll(*flags));
	return 0;
}
