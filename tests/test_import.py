import subprocess
import sys

import gymnasium as gym

import feedbackgym

HEAVY = ("torch", "playwright", "docker", "h5py", "stable_baselines3", "tensorboard", "tqdm", "ray")


def test_import_is_light():
    code = f"import sys, feedbackgym; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_does_not_load_env_modules():
    code = "import sys, feedbackgym; print('feedbackgym.envs.ops.env' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_public_names_exist():
    for name in feedbackgym.__all__:
        assert hasattr(feedbackgym, name), name


def test_dependency_error_is_an_import_error():
    error = feedbackgym.DependencyNotInstalled.for_extra("h5py", "hdf5")
    assert isinstance(error, ImportError)
    assert 'pip install "feedbackgym[hdf5]"' in str(error)


def test_registration_is_idempotent():
    before = {k for k in gym.registry if k.startswith("feedbackgym/")}
    feedbackgym.register_envs()
    after = {k for k in gym.registry if k.startswith("feedbackgym/")}
    assert before == after and "feedbackgym/OpsIncident-v0" in after


def test_make_with_module_prefix():
    env = gym.make("feedbackgym:feedbackgym/OpsIncidentEasy-v0")
    env.reset(seed=0)
    env.close()
