//! `turbonet ui` in a real browser (root, headless Chromium): the page of
//! a running graded lab draws its fabric, shows a `fail` as a failed link
//! within a second, shows a link's parameters when clicked, and grades the
//! tasks on request. The screenshot it takes is the README's picture.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use turbonet_tests::browser::{Browser, chromium};
use turbonet_tests::{
    LabGuard, binary, file_as, require_root, run, skip, text, turbonet, unique_lab, wait_until,
    workspace,
};

/// Stops `turbonet ui` when dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_page_shows_the_fabric_a_failure_within_a_second_and_the_grade() {
    require_root!();
    let Some(chromium) = chromium() else {
        skip("chromium is not installed (scripts/setup installs it)");
        return;
    };
    let lab = unique_lab("ui");
    let file = file_as(&workspace().join("labs/static-ecmp/lab.toml"), &lab, "");
    let guard = LabGuard(lab.clone());
    let up = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    let solved = Command::new("sh")
        .arg(workspace().join("labs/static-ecmp/solution.sh"))
        .env("TURBONET", binary())
        .env("TURBONET_LAB", &lab)
        .output()
        .unwrap();
    assert!(solved.status.success(), "{}", text(&solved));

    let mut child = turbonet()
        .args(["ui", "--lab", &lab, "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _served = Served(child);
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();

    let mut page = Browser::open(&chromium, &url, 1400, 820);
    assert!(
        wait_until(Duration::from_secs(20), || page
            .eval("document.body.dataset.ready")
            == "true"),
        "the page never got ready"
    );

    // The fabric: every link of the lab drawn, one clickable group each.
    let drawn = page.eval("document.querySelectorAll('g.link').length");
    assert_eq!(drawn, 9, "3 leaves x 2 spines + 3 hosts");
    assert!(
        wait_until(Duration::from_secs(10), || {
            page.eval("document.getElementById('status').textContent")
                .as_str()
                .is_some_and(|s| s.starts_with("live"))
        }),
        "the page never read the counters"
    );
    let link = page.eval(
        "[...document.querySelectorAll('g.link')].map(g => g.id.slice(5))\
         .find(n => n.includes('leaf0') && n.includes('spine0'))",
    );
    let link = link.as_str().expect("a leaf0-spine0 link").to_owned();
    let is_down = format!("document.getElementById('link-{link}').classList.contains('down')");
    assert_eq!(page.eval(&is_down), false);

    // A failure shows within a second of `fail` returning.
    let out = run(&["fail", "link", &link, "--lab", &lab]);
    assert!(out.status.success(), "{}", text(&out));
    let failed = Instant::now();
    assert!(
        wait_until(Duration::from_secs(5), || page.eval(&is_down) == true),
        "the page never showed {link} down"
    );
    let shown = failed.elapsed();
    eprintln!("{link} shown down {} ms after `fail`", shown.as_millis());
    assert!(shown < Duration::from_secs(1), "{shown:?}");
    let events = page.eval("document.getElementById('events').textContent");
    assert!(
        events
            .as_str()
            .unwrap()
            .contains(&format!("fail link {link}")),
        "{events}"
    );

    // Clicking the link shows its state and parameters.
    page.eval(&format!(
        "document.querySelector('#link-{link} line.hit')\
         .dispatchEvent(new MouseEvent('click', {{ bubbles: true }}))"
    ));
    assert!(
        wait_until(Duration::from_secs(10), || page
            .eval("document.getElementById('link-rates') !== null")
            == true),
        "no link panel"
    );
    let panel = page.eval("document.getElementById('link-body').textContent");
    assert!(panel.as_str().unwrap().contains("down"), "{panel}");

    // The tasks, graded: with a leaf's uplink down, not everything holds.
    page.eval("document.getElementById('check').click()");
    assert!(
        wait_until(Duration::from_secs(60), || {
            page.eval("document.getElementById('score').textContent")
                .as_str()
                .is_some_and(|s| s.ends_with("/6"))
        }),
        "no grade"
    );
    let score = page.eval("document.getElementById('score').textContent");
    assert_ne!(score, "6/6", "a failed uplink breaks a task");
    let shot = page.screenshot();
    let path = std::env::var_os("TURBONET_UI_SCREENSHOT").map_or_else(
        || std::env::temp_dir().join(format!("{lab}-ui.png")),
        PathBuf::from,
    );
    std::fs::write(&path, shot).unwrap();
    eprintln!("screenshot: {}", path.display());

    // A restore shows too.
    let out = run(&["restore", "link", &link, "--lab", &lab]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        wait_until(Duration::from_secs(5), || page.eval(&is_down) == false),
        "the page never showed {link} up again"
    );
    drop(guard);
}
