import os
import shutil
import warnings

import numpy as np
import pytest
import torch

torch.set_default_dtype(torch.float64)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True)
def _seed_torch():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        yield


@pytest.fixture
def one_torch_thread():
    """Run the test with one torch thread (the service's worker setting), then restore."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def headless_chromium():
    """A factory of headless Chromium drivers (Selenium) that logs the page's console.

    Skips without chromium / chromedriver, unless ``DYNBO_REQUIRE_BROWSER`` is set (as in
    ``.ci/run``), where their absence fails the test. Every driver is quit at teardown.
    """
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not (browser and driver_path):
        if os.environ.get("DYNBO_REQUIRE_BROWSER"):
            pytest.fail("DYNBO_REQUIRE_BROWSER is set but chromium / chromedriver are missing")
        pytest.skip("chromium and chromedriver are not installed (.ci/run installs them)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    drivers = []

    def make(width: int, height: int):
        options = webdriver.ChromeOptions()
        options.binary_location = browser
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu"):
            options.add_argument(flag)
        options.add_argument(f"--window-size={width},{height}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        drivers.append(webdriver.Chrome(options=options, service=Service(driver_path)))
        return drivers[-1]

    yield make
    for driver in drivers:
        driver.quit()
