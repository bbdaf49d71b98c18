"""Contract Memory Compiler: resolve updates first, then traverse."""
