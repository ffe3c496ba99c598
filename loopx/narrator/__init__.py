"""The product narrator: the public-safe case story and the board, rendered from projections,
checked by the redaction gate and the first-screen gate, and pinned by publication records."""
