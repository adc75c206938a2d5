// reader: run a program under two software cpu-clock perf events and print
// the user call chains the kernel recorded, for scripts/kernel-acceptance.sh.
//
//   reader [-i] [-p PERIOD_NS] [-o OUT] LABEL PROG [ARGS...]
//
// One event asks for deferred user call chains (the attribute bits
// defer_callchain and defer_output): its samples carry only a cookie, and the
// kernel's unwind_user (the SFrame user unwinder when the process has
// .sframe, else its frame-pointer walk) writes the chain later, in a
// PERF_RECORD_CALLCHAIN_DEFERRED record, on the way back to user space. The
// other event asks for the ordinary user call chain of each sample (the
// architecture's frame-pointer walk at the time of the sample), to compare.
// Both sample the program's first thread only; with -i (inherit) also every
// thread it starts (a Go program's runtime threads), into the same buffers.
// The kernel maps no buffer of an inherited event that follows its task on
// every CPU, so with -i the events count on CPU 0 only: -i is for a system
// with one CPU (the harness's guest), and refuses to run on more.
//
// Identical chains are counted once, so that the output stays small enough
// for a serial line:
//
//   run LABEL
//   D COUNT NR IP...      deferred chains (PERF_RECORD_CALLCHAIN_DEFERRED)
//   S COUNT NR IP...      ordinary samples' user chains
//   M LO HI OFFSET PATH   the program's executable mappings (hex), as
//                         /proc/PID/maps last showed them while it ran:
//                         where a PIE program, its libraries and the vDSO
//                         lie, to resolve the chains' addresses
//   stat KEY VALUE        samples, records, lost records, exit status
//   end LABEL
//
// The header of a system with an older <linux/perf_event.h> has no names
// for the two bits, so they are set by position in the flags word (bits 38
// and 39, after sigtrap, counted as a little-endian compiler allocates
// bit-fields: from the least significant bit; a big-endian one, s390x's,
// allocates them from the most significant, so there they are bits 25 and
// 24); the harness checks the positions against the UAPI header of the
// kernel tree it is given.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIT_DEFER_CALLCHAIN 38
#define BIT_DEFER_OUTPUT 39

// flagbit is the mask of bit-field position pos (from the first bit-field
// of the flags word on) in the target's allocation order.
static uint64_t flagbit(int pos)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return (uint64_t)1 << (63 - pos);
#else
	return (uint64_t)1 << pos;
#endif
}
#define RECORD_CALLCHAIN_DEFERRED 22
#define CONTEXT_USER_DEFERRED ((uint64_t)-640)
#define CONTEXT_USER ((uint64_t)-512)
#define CONTEXT_MAX ((uint64_t)-4095)

#define RING_PAGES 256
#define MAX_IPS 256
#define MAX_CHAINS 8192

static void die(const char *what)
{
	fprintf(stderr, "reader: %s: %s\n", what, strerror(errno));
	exit(2);
}

struct chain {
	uint64_t count;
	unsigned nr;
	uint64_t *ips;
};

struct table {
	struct chain c[MAX_CHAINS];
	unsigned n;
	uint64_t dropped; // chains not kept because the table was full
};

static void add_chain(struct table *t, const uint64_t *ips, unsigned nr)
{
	for (unsigned i = 0; i < t->n; i++) {
		if (t->c[i].nr == nr && memcmp(t->c[i].ips, ips, nr * sizeof(*ips)) == 0) {
			t->c[i].count++;
			return;
		}
	}
	if (t->n == MAX_CHAINS) {
		t->dropped++;
		return;
	}
	struct chain *c = &t->c[t->n++];
	c->count = 1;
	c->nr = nr;
	c->ips = malloc(nr * sizeof(*ips) + 1);
	if (!c->ips)
		die("malloc");
	memcpy(c->ips, ips, nr * sizeof(*ips));
}

static void print_table(FILE *out, const char *tag, const struct table *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		fprintf(out, "%s %llu %u", tag, (unsigned long long)t->c[i].count, t->c[i].nr);
		for (unsigned j = 0; j < t->c[i].nr; j++)
			fprintf(out, " %llx", (unsigned long long)t->c[i].ips[j]);
		fputc('\n', out);
	}
}

struct ring {
	int fd;
	struct perf_event_mmap_page *meta;
	unsigned char *data;
	uint64_t size;
};

struct stats {
	uint64_t samples, deferred_marks, deferred, lost, other, truncated;
	uint64_t other_thread; // samples of a thread other than the first
};

// The threads samples came from (with -i, the program's other threads).
#define MAX_THREADS 256
static uint32_t threads[MAX_THREADS];
static unsigned nthreads;
static pid_t child;

static void saw_thread(uint32_t tid)
{
	for (unsigned i = 0; i < nthreads; i++)
		if (threads[i] == tid)
			return;
	if (nthreads < MAX_THREADS)
		threads[nthreads++] = tid;
}

static struct table deferred_chains, sample_chains;
static struct stats dstat, sstat;

static int inherit;

static int open_event(pid_t pid, uint64_t period, int deferred)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.sample_period = period;
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_CALLCHAIN;
	a.disabled = 1;
	a.enable_on_exec = 1;
	a.inherit = inherit;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.exclude_callchain_kernel = 1;
	a.sample_max_stack = 127;
	if (deferred) {
		// defer_callchain and defer_output: the two bits after sigtrap
		// in the attribute's flags word (the u64 after read_format).
		uint64_t *flags = (uint64_t *)((char *)&a.read_format + sizeof(a.read_format));
		*flags |= flagbit(BIT_DEFER_CALLCHAIN) | flagbit(BIT_DEFER_OUTPUT);
	}
	int fd = syscall(SYS_perf_event_open, &a, pid, inherit ? 0 : -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		die(deferred ? "perf_event_open (deferred call chains)" : "perf_event_open");
	return fd;
}

static void map_ring(struct ring *r, int fd)
{
	long page = sysconf(_SC_PAGESIZE);
	void *m = mmap(NULL, (RING_PAGES + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		die("mmap ring buffer");
	r->fd = fd;
	r->meta = m;
	r->data = (unsigned char *)m + page;
	r->size = (uint64_t)RING_PAGES * page;
}

// sample_callchain handles a PERF_RECORD_SAMPLE: IP, PID/TID, then the call
// chain with its context markers; the user part is kept.
static void sample_callchain(const uint64_t *w, size_t words, int deferred)
{
	struct stats *st = deferred ? &dstat : &sstat;
	st->samples++;
	if (words < 3)
		return;
	uint32_t tid = (uint32_t)(w[1] >> 32); // PERF_SAMPLE_TID: pid, then tid
	if (deferred) {
		saw_thread(tid);
		if (tid != (uint32_t)child)
			st->other_thread++;
	}
	uint64_t nr = w[2];
	const uint64_t *ips = w + 3;
	if (3 + nr > words)
		return;
	uint64_t user[MAX_IPS];
	unsigned n = 0;
	int in_user = 0;
	for (uint64_t i = 0; i < nr; i++) {
		if (ips[i] >= CONTEXT_MAX) {
			if (ips[i] == CONTEXT_USER_DEFERRED) {
				st->deferred_marks++;
				return;
			}
			in_user = ips[i] == CONTEXT_USER;
			continue;
		}
		if (in_user && n < MAX_IPS)
			user[n++] = ips[i];
	}
	if (deferred)
		return; // a deferred event's sample without the mark: none wanted
	add_chain(&sample_chains, user, n);
}

static void deferred_callchain(const uint64_t *w, size_t words)
{
	dstat.deferred++;
	if (words < 2)
		return;
	uint64_t nr = w[1];
	if (2 + nr > words)
		return;
	if (nr > MAX_IPS) {
		dstat.truncated++;
		nr = MAX_IPS;
	}
	add_chain(&deferred_chains, w + 2, (unsigned)nr);
}

static void drain(struct ring *r, int deferred)
{
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;
	static unsigned char buf[65536];
	while (tail < head) {
		struct perf_event_header h;
		for (size_t i = 0; i < sizeof(h); i++)
			((unsigned char *)&h)[i] = r->data[(tail + i) % r->size];
		if (h.size < sizeof(h)) // h.size is a u16: buf holds any record
			break;
		for (size_t i = 0; i < h.size; i++)
			buf[i] = r->data[(tail + i) % r->size];
		const uint64_t *w = (const uint64_t *)(buf + sizeof(h));
		size_t words = (h.size - sizeof(h)) / 8;
		switch (h.type) {
		case PERF_RECORD_SAMPLE:
			sample_callchain(w, words, deferred);
			break;
		case RECORD_CALLCHAIN_DEFERRED:
			if (deferred)
				deferred_callchain(w, words);
			else
				sstat.other++;
			break;
		case PERF_RECORD_LOST:
			(deferred ? &dstat : &sstat)->lost += words >= 2 ? w[1] : 1;
			break;
		default:
			(deferred ? &dstat : &sstat)->other++;
		}
		tail += h.size;
	}
	__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

// The child's executable mappings, as /proc/PID/maps showed them at the
// last read that found any (the maps of an exited child are empty; nothing
// here maps code after its main): those of files and the kernel's named
// ones ([vdso]), each path whole (it may hold spaces).
static char maps[1 << 16];
static size_t maps_len;

static void read_maps(pid_t pid)
{
	char path[64], line[4096], out[sizeof(maps)];
	size_t n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, off;
		char perms[8];
		int pos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &lo, &hi, perms, &off, &pos) < 4 || pos == 0)
			continue;
		char *name = line + pos;
		name[strcspn(name, "\n")] = 0;
		if (perms[2] != 'x' || (name[0] != '/' && name[0] != '['))
			continue;
		int k = snprintf(out + n, sizeof(out) - n, "M %llx %llx %llx %s\n", lo, hi, off, name);
		if (k < 0 || (size_t)k >= sizeof(out) - n)
			break;
		n += (size_t)k;
	}
	fclose(f);
	if (n > 0) {
		memcpy(maps, out, n);
		maps_len = n;
	}
}

int main(int argc, char **argv)
{
	uint64_t period = 200000;
	FILE *out = stdout;
	int opt;
	while ((opt = getopt(argc, argv, "+ip:o:")) != -1) {
		switch (opt) {
		case 'i':
			inherit = 1;
			break;
		case 'p':
			period = strtoull(optarg, NULL, 0);
			break;
		case 'o':
			out = fopen(optarg, "w");
			if (!out)
				die(optarg);
			break;
		default:
			fprintf(stderr, "usage: reader [-i] [-p PERIOD_NS] [-o OUT] LABEL PROG [ARGS...]\n");
			return 2;
		}
	}
	if (argc - optind < 2) {
		fprintf(stderr, "usage: reader [-i] [-p PERIOD_NS] [-o OUT] LABEL PROG [ARGS...]\n");
		return 2;
	}
	if (inherit && sysconf(_SC_NPROCESSORS_CONF) != 1) {
		fprintf(stderr, "reader: -i samples CPU 0 only, and this system has %ld CPUs\n", sysconf(_SC_NPROCESSORS_CONF));
		return 2;
	}
	const char *label = argv[optind];
	char **prog = argv + optind + 1;

	int go[2];
	if (pipe(go) < 0)
		die("pipe");
	pid_t pid = fork();
	child = pid;
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		char c;
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(126);
		execv(prog[0], prog);
		fprintf(stderr, "reader: exec %s: %s\n", prog[0], strerror(errno));
		_exit(127);
	}
	close(go[0]);
	struct ring rd, rs;
	map_ring(&rd, open_event(pid, period, 1));
	map_ring(&rs, open_event(pid, period, 0));
	if (write(go[1], "g", 1) != 1)
		die("write");
	close(go[1]);

	int status = 0;
	for (;;) {
		struct pollfd p[2] = {{rd.fd, POLLIN, 0}, {rs.fd, POLLIN, 0}};
		poll(p, 2, 20);
		drain(&rd, 1);
		drain(&rs, 0);
		// Every 20 ms once the program has been sampled: a short
		// program's first sample may come while ld.so is still mapping
		// its libraries.
		if (dstat.samples + sstat.samples > 0)
			read_maps(pid);
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (w < 0)
			die("waitpid");
	}
	drain(&rd, 1);
	drain(&rs, 0);

	fprintf(out, "run %s\n", label);
	print_table(out, "D", &deferred_chains);
	print_table(out, "S", &sample_chains);
	fwrite(maps, 1, maps_len, out);
	fprintf(out, "stat exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	fprintf(out, "stat deferred-samples %llu\n", (unsigned long long)dstat.samples);
	fprintf(out, "stat deferred-marks %llu\n", (unsigned long long)dstat.deferred_marks);
	fprintf(out, "stat deferred-records %llu\n", (unsigned long long)dstat.deferred);
	fprintf(out, "stat deferred-lost %llu\n", (unsigned long long)dstat.lost);
	fprintf(out, "stat deferred-truncated %llu\n", (unsigned long long)dstat.truncated);
	fprintf(out, "stat deferred-threads %u\n", nthreads);
	fprintf(out, "stat deferred-other-threads %llu\n", (unsigned long long)dstat.other_thread);
	fprintf(out, "stat samples %llu\n", (unsigned long long)sstat.samples);
	fprintf(out, "stat samples-lost %llu\n", (unsigned long long)sstat.lost);
	fprintf(out, "stat chains-dropped %llu\n", (unsigned long long)(deferred_chains.dropped + sample_chains.dropped));
	fprintf(out, "end %s\n", label);
	fflush(out);
	return 0;
}
