import pytest

pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # as fast as two threads on 2 cores, half the CPU
