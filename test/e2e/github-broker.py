#!/usr/bin/env python3
print("1..0 # SKIP not yet")
