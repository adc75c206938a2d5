// sfreg: a library to preload (LD_PRELOAD) that registers the .sframe of
// every shared object already loaded with the kernel's user unwinder, for
// scripts/kernel-acceptance.sh. The kernel registers the program's and
// its interpreter's PT_GNU_SFRAME at exec; a library's only when user
// space calls sframe_register() (posted as "unwind: Add sframe_(un)register()
// system calls", v2, 2026-05-28; not in any release), which is what a
// dynamic loader would do and what this stands in for.
//
// At load (a constructor, after ld.so mapped every object of the program)
// it walks the objects with dl_iterate_phdr and, for each one with a
// PT_GNU_SFRAME other than the program and the interpreter, calls
//   sframe_register(&(struct sframe_setup){sframe_start, sframe_size,
//                   text_start, text_size}, sizeof(struct sframe_setup))
// once per executable PT_LOAD, the text range as binfmt_elf registers it.
// It logs each object and the outcome (or the errno) to stderr:
//   sfreg: NAME: sframe 0xS+0xN text 0xT+0xM: registered | error: ...
//   sfreg: NAME: no PT_GNU_SFRAME | registered at exec
// At exit (a destructor) it unregisters each section it registered with
// sframe_unregister(), the setup holding sframe_start alone, and logs
//   sfreg: NAME: sframe 0xS: unregistered | unregister error: ...
// The system calls' numbers are SFRAME_REGISTER_NR (a -D the harness
// sets, in one place) and the next one, or the environment's
// SFRAME_REGISTER_NR and SFRAME_UNREGISTER_NR when set.
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SFRAME_REGISTER_NR
#error "build with -DSFRAME_REGISTER_NR=N (the number of sframe_register)"
#endif
#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME 0x6474e554
#endif

struct sframe_setup {
	uint64_t sframe_start;
	uint64_t sframe_size;
	uint64_t text_start;
	uint64_t text_size;
};

static long sysno(void)
{
	const char *e = getenv("SFRAME_REGISTER_NR");
	if (e && *e)
		return strtol(e, NULL, 0);
	return SFRAME_REGISTER_NR;
}

static long unregister_sysno(void)
{
	const char *e = getenv("SFRAME_UNREGISTER_NR");
	if (e && *e)
		return strtol(e, NULL, 0);
	return sysno() + 1;
}

// The sections registered, to unregister at exit.
#define MAX_DONE 64
static struct {
	uint64_t sframe_start;
	char name[256];
} done[MAX_DONE];
static int ndone;

static void remember(const char *name, uint64_t start)
{
	for (int i = 0; i < ndone; i++)
		if (done[i].sframe_start == start)
			return;
	if (ndone == MAX_DONE)
		return;
	done[ndone].sframe_start = start;
	snprintf(done[ndone].name, sizeof(done[ndone].name), "%s", name);
	ndone++;
}

static int one(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "(program)";
	const ElfW(Phdr) *sf = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_SFRAME)
			sf = &info->dlpi_phdr[i];
	if (!sf) {
		fprintf(stderr, "sfreg: %s: no PT_GNU_SFRAME\n", name);
		return 0;
	}
	// The program (first, without a name) and the interpreter (loaded at
	// AT_BASE) were registered by binfmt_elf at exec: a second
	// registration of the same text fails with EEXIST.
	if (!info->dlpi_name || !info->dlpi_name[0] || info->dlpi_addr == getauxval(AT_BASE)) {
		fprintf(stderr, "sfreg: %s: registered at exec\n", name);
		return 0;
	}
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X) || !p->p_memsz)
			continue;
		struct sframe_setup s = {
			.sframe_start = info->dlpi_addr + sf->p_vaddr,
			.sframe_size = sf->p_memsz,
			.text_start = info->dlpi_addr + p->p_vaddr,
			.text_size = p->p_memsz,
		};
		long r = syscall(sysno(), &s, sizeof(s));
		int e = errno;
		fprintf(stderr, "sfreg: %s: sframe %#llx+%#llx text %#llx+%#llx: ", name,
			(unsigned long long)s.sframe_start, (unsigned long long)s.sframe_size,
			(unsigned long long)s.text_start, (unsigned long long)s.text_size);
		if (r == 0) {
			fprintf(stderr, "registered\n");
			remember(name, s.sframe_start);
		}
		else
			fprintf(stderr, "error: %s (errno %d, syscall %ld)\n", strerror(e), e, sysno());
	}
	return 0;
}

__attribute__((constructor)) static void sfreg_init(void)
{
	dl_iterate_phdr(one, NULL);
}

__attribute__((destructor)) static void sfreg_fini(void)
{
	for (int i = 0; i < ndone; i++) {
		struct sframe_setup s = {.sframe_start = done[i].sframe_start};
		long r = syscall(unregister_sysno(), &s, sizeof(s));
		int e = errno;
		fprintf(stderr, "sfreg: %s: sframe %#llx: ", done[i].name, (unsigned long long)s.sframe_start);
		if (r == 0)
			fprintf(stderr, "unregistered\n");
		else
			fprintf(stderr, "unregister error: %s (errno %d, syscall %ld)\n", strerror(e), e, unregister_sysno());
	}
}
