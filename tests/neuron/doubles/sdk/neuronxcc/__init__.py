"""Test double of the Neuron SDK's `neuronxcc` package, for the neuron backend's contract tests only.

It exists because the real package and a NeuronCore cannot exist on our machines. Nothing it returns is a
measurement: latencies and counters are recorded trn1 numbers or test settings (see `nki`).
"""
