# Hand-written x86-64 functions whose CFA, FP or RA rules SFrame V3 can only
# encode as flexible FDEs (attr "F"); V2 (binutils 2.44) skips them.
	.text
# CFA based on a register other than SP or FP (%rbx).
	.globl cfa_rbx
	.type cfa_rbx,@function
cfa_rbx:
	.cfi_startproc
	movq %rsp, %rbx
	.cfi_def_cfa rbx, 8
	subq $64, %rsp
	movq %rbx, %rsp
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size cfa_rbx,.-cfa_rbx

# The return address held in a register (%r11) instead of on the stack.
	.globl ra_reg
	.type ra_reg,@function
ra_reg:
	.cfi_startproc
	popq %r11
	.cfi_def_cfa_offset 0
	.cfi_register rip, r11
	pushq %r11
	.cfi_def_cfa_offset 8
	.cfi_offset rip, -8
	ret
	.cfi_endproc
	.size ra_reg,.-ra_reg

# The caller's frame pointer held in a register (%r12).
	.globl fp_in_reg
	.type fp_in_reg,@function
fp_in_reg:
	.cfi_startproc
	movq %rbp, %r12
	.cfi_register rbp, r12
	movq %rsp, %rbp
	movq %r12, %rbp
	.cfi_restore rbp
	ret
	.cfi_endproc
	.size fp_in_reg,.-fp_in_reg

# A rule GNU as does not translate at all (DW_CFA_offset_extended_sf written
# as a raw escape): sid as warns and emits no SFrame FDE for the function.
	.globl fp_escape
	.type fp_escape,@function
fp_escape:
	.cfi_startproc
	pushq %rbp
	.cfi_def_cfa_offset 16
	# DW_CFA_offset_extended_sf rbp, -2 (x data alignment -8 = CFA-16)
	.cfi_escape 0x11, 0x06, 0x7e
	popq %rbp
	.cfi_def_cfa_offset 8
	.cfi_restore rbp
	ret
	.cfi_endproc
	.size fp_escape,.-fp_escape
