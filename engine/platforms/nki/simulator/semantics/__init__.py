"""What NKI means: the language and ISA, run on numpy with the hardware's rules."""
