"""The account: checks over one run (check 1 decided-delivered first), the "It understood" row, pointers."""
