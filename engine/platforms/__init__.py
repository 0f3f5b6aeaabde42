"""One folder per platform; `registry` is where the rest of the product learns about them."""
