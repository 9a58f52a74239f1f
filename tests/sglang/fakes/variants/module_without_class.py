"""FAKE module that exists in this version but has no FrozenKVMTPCudaGraphRunner."""
