"""The lowest layer: argument checks and the exceptions every layer raises."""
