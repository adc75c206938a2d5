# Edge cases of GNU as's SFrame translation (AArch64), assembled by
# TestGasEdgeCases with sid as --gsframe.
	.text
# CFA on x9: no flexible FDEs on AArch64.
	.globl cfa_x9
	.type cfa_x9,@function
cfa_x9:
	.cfi_startproc
	mov x9, sp
	.cfi_def_cfa x9, 0
	sub sp, sp, #64
	mov sp, x9
	.cfi_def_cfa sp, 0
	ret
	.cfi_endproc
	.size cfa_x9,.-cfa_x9
# RA in x9.
	.globl ra_x9
	.type ra_x9,@function
ra_x9:
	.cfi_startproc
	mov x9, x30
	.cfi_register x30, x9
	mov x30, x9
	.cfi_restore x30
	ret
	.cfi_endproc
	.size ra_x9,.-ra_x9
# args_size with an SP-based CFA.
	.globl args_sp
	.type args_sp,@function
args_sp:
	.cfi_startproc
	sub sp, sp, #32
	.cfi_def_cfa_offset 32
	.cfi_escape 0x2e, 0x10
	add sp, sp, #32
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size args_sp,.-args_sp
# PAC with the B key and a frame record.
	.globl pacb
	.type pacb,@function
pacb:
	.cfi_startproc
	.cfi_b_key_frame
	pacibsp
	.cfi_negate_ra_state
	stp x29, x30, [sp, #-32]!
	.cfi_def_cfa_offset 32
	.cfi_offset 29, -32
	.cfi_offset 30, -24
	mov x29, sp
	.cfi_def_cfa_register 29
	str x19, [sp, #16]
	.cfi_offset 19, -16
	ldr x19, [sp, #16]
	ldp x29, x30, [sp], #32
	.cfi_def_cfa sp, 0
	.cfi_restore 30
	.cfi_restore 29
	.cfi_restore 19
	autibsp
	.cfi_negate_ra_state
	ret
	.cfi_endproc
	.size pacb,.-pacb
# FP saved without RA: not representable.
	.globl fp_no_ra
	.type fp_no_ra,@function
fp_no_ra:
	.cfi_startproc
	str x29, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	ldr x29, [sp], #16
	.cfi_def_cfa_offset 0
	.cfi_restore 29
	ret
	.cfi_endproc
	.size fp_no_ra,.-fp_no_ra
# Outermost frame.
	.globl start
	.type start,@function
start:
	.cfi_startproc
	.cfi_undefined x30
	mov x29, #0
	bl cfa_x9
	brk #0
	.cfi_endproc
	.size start,.-start
