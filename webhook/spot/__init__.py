"""Spot capacity on the cluster side: which nodes are spot, which are about to
be reclaimed, which pods tolerate interruption or must stay on demand; shared by the scheduler
extender and the spot-termination controller."""
