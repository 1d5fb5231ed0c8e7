"""Blackwell tcgen05 (sm_100a/sm_120a): the SASS the 5th-generation MMA becomes."""
