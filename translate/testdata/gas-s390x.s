# Edge cases of GNU as's SFrame translation (s390x), assembled by
# TestGasEdgeCases with sid as --gsframe. The CIE gives CFA = r15+160.
	.text
# gcc's frame: stmg saves r11-r15 (r15 too: SFrame does not need it),
# then a frame, then r11 as the frame pointer and CFA base.
	.globl fp_frame
	.type fp_frame,@function
fp_frame:
	.cfi_startproc
	stmg %r11,%r15,88(%r15)
	.cfi_offset 11,-72
	.cfi_offset 14,-48
	.cfi_offset 15,-40
	lay %r15,-168(%r15)
	.cfi_def_cfa_offset 328
	lgr %r11,%r15
	.cfi_def_cfa_register 11
	nop
	lmg %r11,%r15,256(%r11)
	.cfi_restore 15
	.cfi_restore 14
	.cfi_restore 11
	.cfi_def_cfa 15,160
	br %r14
	.cfi_endproc
	.size fp_frame,.-fp_frame
# A leaf keeping FP, RA and SP in floating-point registers: flexible FDE.
	.globl fpr_leaf
	.type fpr_leaf,@function
fpr_leaf:
	.cfi_startproc
	ldgr %f0,%r11
	.cfi_register 11,16
	ldgr %f2,%r14
	.cfi_register 14,17
	ldgr %f4,%r15
	.cfi_register 15,18
	lay %r15,-160(%r15)
	.cfi_def_cfa_offset 320
	nop
	lgdr %r15,%f4
	.cfi_restore 15
	.cfi_def_cfa_offset 160
	lgdr %r14,%f2
	.cfi_restore 14
	lgdr %r11,%f0
	.cfi_restore 11
	br %r14
	.cfi_endproc
	.size fpr_leaf,.-fpr_leaf
# CFA on r1 (gcc's static stack clash probing): flexible FDE.
	.globl cfa_r1
	.type cfa_r1,@function
cfa_r1:
	.cfi_startproc
	lgr %r1,%r15
	.cfi_def_cfa_register 1
	lay %r15,-4096(%r15)
	nop
	lgr %r15,%r1
	.cfi_def_cfa_register 15
	br %r14
	.cfi_endproc
	.size cfa_r1,.-cfa_r1
# FP saved without RA: the RA data word is padding.
	.globl fp_no_ra
	.type fp_no_ra,@function
fp_no_ra:
	.cfi_startproc
	stg %r11,88(%r15)
	.cfi_offset 11,-72
	lay %r15,-160(%r15)
	.cfi_def_cfa_offset 320
	nop
	lay %r15,160(%r15)
	.cfi_def_cfa_offset 160
	lg %r11,88(%r15)
	.cfi_restore 11
	br %r14
	.cfi_endproc
	.size fp_no_ra,.-fp_no_ra
# A large frame (2-byte data words), remember/restore around an early
# return, SP = CFA-160 said explicitly.
	.globl big_state
	.type big_state,@function
big_state:
	.cfi_startproc
	.cfi_val_offset 15,-160
	stmg %r14,%r15,112(%r15)
	.cfi_offset 14,-48
	lay %r15,-40000(%r15)
	.cfi_def_cfa_offset 40160
	.cfi_remember_state
	lay %r15,40000(%r15)
	.cfi_def_cfa_offset 160
	lg %r14,112(%r15)
	.cfi_restore 14
	br %r14
	.cfi_restore_state
	nop
	lay %r15,40000(%r15)
	.cfi_def_cfa_offset 160
	br %r14
	.cfi_endproc
	.size big_state,.-big_state
# The outermost frame.
	.globl _start
	.type _start,@function
_start:
	.cfi_startproc
	.cfi_undefined 14
	lay %r15,-160(%r15)
	.cfi_def_cfa_offset 320
	nop
	.cfi_endproc
	.size _start,.-_start
# SP = CFA+0: contradicts the ABI's CFA; gas skips it, we move the CFA
# 160 up (CFA = r15+320, RA in r14).
	.globl sp_val0
	.type sp_val0,@function
sp_val0:
	.cfi_startproc
	.cfi_val_offset 15,0
	br %r14
	.cfi_endproc
	.size sp_val0,.-sp_val0
# RA in an access register (DWARF 49): no control word names it.
	.globl ra_acr
	.type ra_acr,@function
ra_acr:
	.cfi_startproc
	sar %a1,%r14
	.cfi_register 14,49
	br %r14
	.cfi_endproc
	.size ra_acr,.-ra_acr
