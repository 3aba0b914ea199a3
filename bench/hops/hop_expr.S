/* ot_bench_hop with its canonical frame address written as a DWARF expression (DW_CFA_def_cfa_expression:
 * DW_OP_breg6 (rbp) +16) instead of the usual "rbp + 16" rule. It means the same thing, but libunwind's
 * fast trace only handles register+offset rules, so any such frame on the stack sends unw_backtrace down
 * its slow path (unw_step per frame). GCC writes this form for functions that realign their stack. */
    .text
    .globl ot_bench_hop
    .type ot_bench_hop, @function
    .p2align 4
ot_bench_hop:
    .cfi_startproc
    push %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    mov %rsp, %rbp
    .cfi_escape 0x0f, 0x02, 0x76, 0x10
    mov %rdi, %rax
    mov %rsi, %rdi
    call *%rax
    nop
    pop %rbp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .size ot_bench_hop, .-ot_bench_hop
    .section .note.GNU-stack,"",@progbits
