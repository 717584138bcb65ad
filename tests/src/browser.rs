//! Headless Chromium, driven over the DevTools protocol (JSON messages over
//! a WebSocket): open a page, evaluate script in it, take a screenshot.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// Debian's Chromium, if installed.
pub fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A headless Chromium showing one page; closed (and its profile removed)
/// when dropped.
#[allow(missing_debug_implementations)] // a socket and a child process
pub struct Browser {
    child: Child,
    profile: PathBuf,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    /// The page's session.
    session: String,
    next: u64,
}

impl Browser {
    /// Starts `chromium` and opens `url` in a window of `width` x `height`.
    pub fn open(chromium: &Path, url: &str, width: u32, height: u32) -> Browser {
        let profile = std::env::temp_dir().join(format!("tn-chromium-{}", std::process::id()));
        let mut child = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                &format!("--user-data-dir={}", profile.display()),
                &format!("--window-size={width},{height}"),
                "about:blank",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        // It says where its DevTools listen on stderr; the rest is drained.
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("ws://") {
                    let _ = tx.send(line[at..].trim().to_owned());
                }
            }
        });
        let address = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("chromium's DevTools address within 30 s");
        let (mut socket, _) = tungstenite::connect(&address).expect("DevTools connection");
        if let MaybeTlsStream::Plain(stream) = socket.get_mut() {
            stream
                .set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
        }
        let mut browser = Browser {
            child,
            profile,
            socket,
            session: String::new(),
            next: 0,
        };
        let target = browser.call("Target.createTarget", json!({ "url": url }));
        let attached = browser.call(
            "Target.attachToTarget",
            json!({ "targetId": target["targetId"], "flatten": true }),
        );
        browser.session = attached["sessionId"].as_str().unwrap().to_owned();
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }),
        );
        browser
    }

    /// Calls `method` (on the page once attached) and returns its result;
    /// an error reply panics.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .expect("DevTools send");
        loop {
            let reply = self.socket.read().expect("DevTools reply");
            let Message::Text(text) = reply else { continue };
            let reply: Value = serde_json::from_str(&text).unwrap();
            if reply["id"] != id {
                continue; // an event
            }
            if let Some(error) = reply.get("error") {
                panic!("{method}: {error}");
            }
            return reply["result"].clone();
        }
    }

    /// The value of `expression` in the page (null while the page loads,
    /// or if it throws).
    pub fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        );
        if result.get("exceptionDetails").is_some() {
            return Value::Null;
        }
        result["result"]["value"].clone()
    }

    /// The page as a PNG.
    pub fn screenshot(&mut self) -> Vec<u8> {
        let shot = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
