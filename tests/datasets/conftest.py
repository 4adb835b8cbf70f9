"""Fixtures for the trajectory store tests: datasets and Minari go under the test's tmp dir."""

import pytest

pytest.importorskip("h5py")


@pytest.fixture(autouse=True)
def _dataset_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("FEEDBACKGYM_DATASETS_PATH", str(tmp_path / "datasets"))
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "store"
