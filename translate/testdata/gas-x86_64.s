# Edge cases of GNU as's SFrame translation (x86-64), assembled by
# TestGasEdgeCases with sid as --gsframe; the translator must agree with it
# at every PC (or skip exactly the functions gas skips).
	.text
# DW_CFA_GNU_args_size with an SP-based CFA: gas emits no FDE.
	.globl args_sp
	.type args_sp,@function
args_sp:
	.cfi_startproc
	pushq $1
	.cfi_adjust_cfa_offset 8
	.cfi_escape 0x2e, 0x8
	popq %rax
	.cfi_adjust_cfa_offset -8
	.cfi_escape 0x2e, 0x0
	ret
	.cfi_endproc
	.size args_sp,.-args_sp
# DW_CFA_GNU_args_size while FP-based: ignored, also after the CFA moves
# back to rsp.
	.globl args_fp
	.type args_fp,@function
args_fp:
	.cfi_startproc
	pushq %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	movq %rsp, %rbp
	.cfi_def_cfa_register rbp
	pushq $1
	.cfi_escape 0x2e, 0x8
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size args_fp,.-args_fp
# An explicit same_value for rip: ignored.
	.globl same_rip
	.type same_rip,@function
same_rip:
	.cfi_startproc
	nop
	.cfi_same_value rip
	ret
	.cfi_endproc
	.size same_rip,.-same_rip
# val_offset for rbp: not representable.
	.globl valoff_fp
	.type valoff_fp,@function
valoff_fp:
	.cfi_startproc
	nop
	.cfi_val_offset rbp, -16
	ret
	.cfi_endproc
	.size valoff_fp,.-valoff_fp
# remember/restore state around an early return.
	.globl state
	.type state,@function
state:
	.cfi_startproc
	pushq %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	testq %rdi, %rdi
	je 1f
	.cfi_remember_state
	popq %rbp
	.cfi_def_cfa_offset 8
	.cfi_restore rbp
	ret
1:	.cfi_restore_state
	popq %rbp
	.cfi_def_cfa_offset 8
	.cfi_restore rbp
	ret
	.cfi_endproc
	.size state,.-state
# Callee-saved registers other than rbp make no new rows.
	.globl saves
	.type saves,@function
saves:
	.cfi_startproc
	pushq %rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	pushq %r12
	.cfi_def_cfa_offset 24
	.cfi_offset r12, -24
	nop
	.cfi_offset r13, -32
	popq %r12
	.cfi_def_cfa_offset 16
	popq %rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size saves,.-saves
# rbp saved in a register: a flexible FDE.
	.globl fp_reg
	.type fp_reg,@function
fp_reg:
	.cfi_startproc
	movq %rbp, %r12
	.cfi_register rbp, r12
	movq %r12, %rbp
	.cfi_restore rbp
	ret
	.cfi_endproc
	.size fp_reg,.-fp_reg
# CFA on rsp with rsp undefined: not representable.
	.globl undef_fp
	.type undef_fp,@function
undef_fp:
	.cfi_startproc
	nop
	.cfi_undefined rbp
	ret
	.cfi_endproc
	.size undef_fp,.-undef_fp
