/* findfre: asks GNU libsframe what it finds in an SFrame section, for
   package libsframecheck. Written for this project; it declares only what
   it uses.

   Usage: findfre fdes SECTION   one text line per FDE, as libsframe reads it:
                                 "F index start size info info2 rep nfres"
          findfre pcs SECTION    reads pairs of int64 (host order) from stdin:
                                 a section-relative PC and the FDE type
                                 (default 0, flex 1) of the function that
                                 holds it; writes one 64-byte record per PC
                                 to stdout: int32 status (0 found, else
                                 sframe_find_fre's return), uint32 FRE start,
                                 uint8 FRE info, uint8 data-word count,
                                 uint8 RA-mangled (libsframe's accessor),
                                 uint8 accessor errors (1 base register,
                                 2 CFA, 4 RA, 8 FP offset; 16: RA undefined,
                                 2.47 only), 6 uint32 data words (unsigned,
                                 as libsframe gives them; zero past the
                                 count), then int32 base register id, CFA,
                                 RA and FP offsets as libsframe's accessors
                                 give them, 12 bytes zero
   Exit status 3 with "decode: N MESSAGE" when sframe_decode refuses the
   section; the first line of "fdes" is "V version flags abi nfdes".

   Built against binutils 2.47's libsframe (sid, libsframe3) with its
   header, or with -DLIBSFRAME_244 against 2.44's libsframe.so.1 (trixie),
   which Debian ships without a header and whose ABI differs: its row
   entry keeps 12 data bytes (the 2.47 one 24, so the info byte moves), its
   sframe_find_fre takes a 32-bit PC, and it has no sframe_get_fre_udata.
   The 2.44 declarations below follow what libsframe.so.1's machine code
   does (objdump -d: sframe_find_fre reads the PC from %esi and copies a
   20-byte entry; sframe_decoder_get_funcdesc_v2 stores 4-byte counts,
   size and start and 1-byte info and repeat size). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LIBSFRAME_244
typedef struct lsf_dec lsf_dec;
typedef struct {
	uint32_t start;
	unsigned char data[12];
	unsigned char info;
} lsf_fre;
lsf_dec *sframe_decode(const char *buf, size_t size, int *errp);
void sframe_decoder_free(lsf_dec **d);
const char *sframe_errmsg(int err);
uint8_t sframe_decoder_get_version(lsf_dec *d);
unsigned int sframe_decoder_get_num_fidx(lsf_dec *d);
int sframe_find_fre(lsf_dec *d, int32_t pc, lsf_fre *f);
int sframe_decoder_get_funcdesc_v2(lsf_dec *d, unsigned int i, uint32_t *nfres,
	uint32_t *size, int32_t *start, unsigned char *info, uint8_t *rep);
/* The 2.44 accessors take no FDE type (objdump -d: the FRE in %rsi, the
   error pointer in %rdx; the base register one takes the FRE in %rdi). */
unsigned int sframe_fre_get_base_reg_id(lsf_fre *f, int *errp);
int32_t sframe_fre_get_cfa_offset(lsf_dec *d, lsf_fre *f, int *errp);
int32_t sframe_fre_get_fp_offset(lsf_dec *d, lsf_fre *f, int *errp);
int32_t sframe_fre_get_ra_offset(lsf_dec *d, lsf_fre *f, int *errp);
_Bool sframe_fre_get_ra_mangled_p(lsf_dec *d, lsf_fre *f, int *errp);
#define FRE_START(f) ((f).start)
#define FRE_INFO(f) ((f).info)
#else
#include "ansidecl.h"
#include <sframe-api.h>
typedef sframe_decoder_ctx lsf_dec;
typedef sframe_frame_row_entry lsf_fre;
#define FRE_START(f) ((f).fre_start_addr)
#define FRE_INFO(f) ((f).fre_info)
#endif

static char *slurp(const char *name, size_t *len)
{
	FILE *f = fopen(name, "rb");
	if (!f) { perror(name); exit(1); }
	if (fseek(f, 0, SEEK_END) != 0) { perror(name); exit(1); }
	long n = ftell(f);
	if (n < 0 || fseek(f, 0, SEEK_SET) != 0) { perror(name); exit(1); }
	*len = (size_t)n;
	char *b = malloc(*len ? *len : 1);
	if (!b || fread(b, 1, *len, f) != *len) { perror(name); exit(1); }
	fclose(f);
	return b;
}

/* words fills w with the FRE's data words as unsigned values and returns
   their count. */
static int words(const lsf_fre *f, uint32_t w[6])
{
	int n = (FRE_INFO(*f) >> 1) & 0xf, code = (FRE_INFO(*f) >> 5) & 3;
	memset(w, 0, 6 * sizeof w[0]);
	if (n > 6)
		n = 6;
#ifdef LIBSFRAME_244
	int sz = 1 << code;
	if (n * sz > (int)sizeof f->data)
		n = sizeof f->data / sz;
	for (int i = 0; i < n; i++) {
		const unsigned char *p = f->data + i * sz;
		if (sz == 1)
			w[i] = p[0];
		else if (sz == 2) {
			uint16_t v;
			memcpy(&v, p, 2);
			w[i] = v;
		} else
			memcpy(&w[i], p, 4);
	}
#else
	(void)code;
	for (int i = 0; i < n; i++) {
		int err = 0;
		w[i] = sframe_get_fre_udata(f, i, &err);
		if (err) {
			fprintf(stderr, "sframe_get_fre_udata(%d): %s\n", i, sframe_errmsg(err));
			exit(1);
		}
	}
#endif
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "fdes") != 0 && strcmp(argv[1], "pcs") != 0)) {
		fprintf(stderr, "usage: %s fdes|pcs SECTION\n", argv[0]);
		return 2;
	}
	size_t len;
	char *sec = slurp(argv[2], &len);
	int err = 0;
	lsf_dec *d = sframe_decode(sec, len, &err);
	if (!d) {
		printf("decode: %d %s\n", err, sframe_errmsg(err));
		return 3;
	}
	if (strcmp(argv[1], "fdes") == 0) {
		uint8_t ver = sframe_decoder_get_version(d);
		unsigned int n = sframe_decoder_get_num_fidx(d);
		printf("V %u %u\n", ver, n);
		for (unsigned int i = 0; i < n; i++) {
			uint32_t nfres = 0, size = 0;
			unsigned char info = 0, info2 = 0;
			uint8_t rep = 0;
			long long start;
			int rc;
#ifndef LIBSFRAME_244
			if (ver >= 3) {
				int64_t s = 0;
				rc = sframe_decoder_get_funcdesc_v3(d, i, &nfres, &size, &s, &info, &info2, &rep);
				start = s;
			} else
#endif
			{
				int32_t s = 0;
				rc = sframe_decoder_get_funcdesc_v2(d, i, &nfres, &size, &s, &info, &rep);
				start = s;
			}
			if (rc != 0) {
				printf("E %u %d\n", i, rc);
				continue;
			}
			printf("F %u %lld %u %u %u %u %u\n", i, start, size, info, info2, rep, nfres);
		}
		return 0;
	}
	static int64_t in[2 * 4096];
	static unsigned char out[4096 * 64];
	size_t n;
	while ((n = fread(in, 2 * sizeof in[0], 4096, stdin)) > 0) {
		for (size_t i = 0; i < n; i++) {
			lsf_fre f;
			uint32_t w[6];
			memset(&f, 0, sizeof f);
#ifdef LIBSFRAME_244
			int32_t st = sframe_find_fre(d, (int32_t)in[2 * i], &f);
#else
			int32_t st = sframe_find_fre(d, in[2 * i], &f);
			uint32_t fdetype = (uint32_t)in[2 * i + 1];
#endif
			unsigned char *r = out + i * 64;
			memset(r, 0, 64);
			memcpy(r, &st, 4);
			if (st != 0)
				continue;
			uint32_t s = FRE_START(f);
			memcpy(r + 4, &s, 4);
			r[8] = FRE_INFO(f);
			r[9] = (unsigned char)words(&f, w);
			memcpy(r + 12, w, sizeof w);
			int e1 = 0, e2 = 0, e3 = 0, e4 = 0, e5 = 0;
			int32_t v[4];
			v[0] = (int32_t)sframe_fre_get_base_reg_id(&f, &e1);
#ifdef LIBSFRAME_244
			v[1] = sframe_fre_get_cfa_offset(d, &f, &e2);
			v[2] = sframe_fre_get_ra_offset(d, &f, &e3);
			v[3] = sframe_fre_get_fp_offset(d, &f, &e4);
#else
			v[1] = sframe_fre_get_cfa_offset(d, &f, fdetype, &e2);
			v[2] = sframe_fre_get_ra_offset(d, &f, fdetype, &e3);
			v[3] = sframe_fre_get_fp_offset(d, &f, fdetype, &e4);
#endif
			r[10] = sframe_fre_get_ra_mangled_p(d, &f, &e5) ? 1 : 0;
			r[11] = (e1 ? 1 : 0) | (e2 ? 2 : 0) | (e3 ? 4 : 0) | (e4 ? 8 : 0);
#ifndef LIBSFRAME_244
			int e6 = 0;
			if (sframe_fre_get_ra_undefined_p(d, &f, &e6) && !e6)
				r[11] |= 16;
#endif
			memcpy(r + 36, v, sizeof v);
		}
		if (fwrite(out, 64, n, stdout) != n) { perror("write"); return 1; }
	}
	if (ferror(stdin)) { perror("read"); return 1; }
	sframe_decoder_free(&d);
	free(sec);
	return 0;
}
