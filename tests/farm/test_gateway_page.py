"""The gateway's test page in a real headless Chromium (Debian's chromium and chromium-driver,
driven by Selenium): a person's steps, from typing a key to hearing the audio."""

from __future__ import annotations

import shutil

import pytest

from tests.farm.conftest import WorkerProcess, new_key

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Chromium and its driver (apt-get install chromium chromium-driver; scripts/services does)",
)


def test_type_pick_a_voice_speak_and_play(gateway: str, redis_url: str, worker: WorkerProcess) -> None:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--autoplay-policy=no-user-gesture-required",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    try:
        driver.get(gateway)
        # The page rebuilds the voice list when the voices arrive: an option read meanwhile is stale.
        wait = WebDriverWait(driver, 60, ignored_exceptions=(StaleElementReferenceException,))
        driver.find_element(By.ID, "key").send_keys(new_key(redis_url))
        driver.find_element(By.ID, "text").click()  # leaving the key field loads the voices
        wait.until(
            lambda d: Select(d.find_element(By.ID, "voice")).first_selected_option.get_attribute("value")
        )
        assert (
            Select(driver.find_element(By.ID, "voice")).first_selected_option.get_attribute("value") == "joe"
        )
        text = driver.find_element(By.ID, "text")
        text.clear()
        text.send_keys("A person typed this, and the farm spoke it.")
        Select(driver.find_element(By.ID, "format")).select_by_visible_text("wav")
        Select(driver.find_element(By.ID, "loudness")).select_by_value("-16")
        driver.find_element(By.ID, "speak").click()
        wait.until(
            lambda d: (
                d.find_element(By.ID, "player").is_displayed()
                or "error" in (d.find_element(By.ID, "status").get_attribute("class") or "")
            )
        )
        status = driver.find_element(By.ID, "status").text
        assert status.startswith("Done:") and "wav audio, mastered to -16 LUFS" in status, status
        # The browser decoded the audio: it knows its length, and it plays.
        duration = wait.until(
            lambda d: d.execute_script(
                "const p = document.getElementById('player');return p.readyState >= 1 ? p.duration : 0;"
            )
        )
        assert 1.5 < duration < 6
        wait.until(lambda d: d.execute_script("return document.getElementById('player').currentTime > 0"))
    finally:
        driver.quit()
