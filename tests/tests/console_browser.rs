//! The approval console in a real browser: Debian's `chromium`, driven over WebDriver
//! (`chromedriver`), against the bank demo of `examples/approval_console`. A teller signs in, sees
//! the pending $20,000.00 transfer with its recipient, approves it and sees the outcome; the
//! dispatcher confirms it executed exactly once. The requester is refused. Two tellers complete a
//! dual-control wire. Screenshots go to `target/console-screenshots/`.
//!
//! Run with `cargo test --test console_browser --features browser` (`.ci/run` installs
//! `chromium` and `chromium-driver` when absent; `TOOLGUARD_CHROMEDRIVER` names another driver).

#[path = "../../examples/approval_console/app.rs"]
#[allow(
    unused_imports,
    reason = "the demo binary prints the user list; this test does not"
)]
mod app;
#[path = "../../examples/bank/ledger.rs"]
#[allow(dead_code)]
mod ledger;
#[path = "../../examples/approval_console/login.rs"]
#[allow(
    dead_code,
    reason = "the demo binary prints the users' descriptions; this test does not"
)]
mod login;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use toolguard::store::ApprovalState;
use toolguard::{Principal, Status, ToolCall};

/// The chromedriver child, killed when the test ends.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_driver() -> Driver {
    let program =
        std::env::var("TOOLGUARD_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".to_owned());
    let port = free_port();
    let child = Command::new(&program)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {program}: {e}. Install Debian's chromium and chromium-driver \
                 (apt-get install -y chromium chromium-driver) or set TOOLGUARD_CHROMEDRIVER"
            )
        });
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return driver;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("chromedriver did not listen on port {port}");
}

async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": std::env::var("TOOLGUARD_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned()),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--lang=en-US"],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a chromium session")
}

fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(screenshot_dir().join(format!("{name}.png")), png).unwrap();
}

/// The text of the first element matching `css`, waiting for it to appear (a page that is still
/// loading after a click has no elements yet).
async fn text(c: &Client, css: &str) -> String {
    c.wait()
        .for_element(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn sign_in(c: &Client, base: &str, user: &str) {
    c.goto(&format!("{base}/login")).await.unwrap();
    c.find(Locator::Id("username"))
        .await
        .unwrap()
        .send_keys(user)
        .await
        .unwrap();
    c.find(Locator::Id("password"))
        .await
        .unwrap()
        .send_keys(app::DEMO_PASSWORD)
        .await
        .unwrap();
    c.find(Locator::Css("#login button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The sign-in page has a heading of its own: wait until it is gone, then for the next page's.
    left_page(c, "login").await;
    c.wait().for_element(Locator::Css("h1")).await.unwrap();
}

/// Waits until the element with `id` is no longer on the page, i.e. the browser has navigated on.
async fn left_page(c: &Client, id: &str) {
    for _ in 0..400 {
        if c.find(Locator::Id(id)).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the page with #{id} did not go away within 10 s");
}

async fn sign_out(c: &Client) {
    c.find(Locator::Css("header form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait().for_element(Locator::Id("login")).await.unwrap();
}

async fn open_request(c: &Client, base: &str, id: &str) {
    c.goto(&format!("{base}/console/requests/{id}"))
        .await
        .unwrap();
    c.wait().for_element(Locator::Id("state")).await.unwrap();
}

async fn approve(c: &Client) {
    c.find(Locator::Css("#approve button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Id("outcome-status"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(toolguard_chromium),
    ignore = "needs Debian's chromium and chromium-driver (`.ci/run` installs them)"
)]
async fn reviewers_decide_in_a_real_browser() {
    let driver = start_driver().await;
    let demo = app::start("127.0.0.1:0").await.unwrap();
    let (transfer, wire) = (demo.pending[0].clone(), demo.pending[1].clone());
    let c = browser(&driver).await;
    let base = demo.url.clone();

    // A teller sees the pending transfer with its exact amount and recipient.
    sign_in(&c, &base, "tina").await;
    assert!(
        c.current_url()
            .await
            .unwrap()
            .path()
            .ends_with("/console/requests")
    );
    let row = text(&c, &format!("tr[data-id='{transfer}']")).await;
    assert!(
        row.contains("transfer_funds") && row.contains("20,000.00 USD"),
        "{row}"
    );
    assert!(row.contains("You can decide"), "{row}");
    // The countdown runs (the console's own script works under its CSP).
    let before = text(&c, &format!("tr[data-id='{transfer}'] .countdown")).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let after = text(&c, &format!("tr[data-id='{transfer}'] .countdown")).await;
    assert_ne!(before, after, "the countdown ticks");
    shot(&c, "pending").await;

    c.find(Locator::Css(&format!("tr[data-id='{transfer}'] a.review")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait().for_element(Locator::Id("amount")).await.unwrap();
    assert_eq!(text(&c, "#amount").await, "20,000.00 USD");
    assert_eq!(
        text(&c, "tr[data-argument='to_account'] td").await,
        "ext-vendor-7"
    );
    assert_eq!(text(&c, "#requester").await, "alice (acme)");
    // The model's markup is text on the page, not markup.
    let memo = text(&c, "tr[data-argument='memo'] td").await;
    assert_eq!(memo, "Invoice 2291 <marquee>alert('pwned')</marquee>");
    let scripts = c.find_all(Locator::Css("script")).await.unwrap();
    assert_eq!(scripts.len(), 1, "only the console's own script");
    let binding = text(&c, "#binding").await;
    assert_eq!(binding.len(), 64);
    c.set_window_size(1280, 1400).await.unwrap();
    shot(&c, "detail").await;
    c.set_window_size(1280, 1000).await.unwrap();

    approve(&c).await;
    assert_eq!(text(&c, "#outcome-status").await, "ok");
    assert_eq!(text(&c, "#state").await, "executed");
    shot(&c, "outcome").await;

    // The dispatcher agrees: executed exactly once, and a retry of the call replays the outcome.
    assert_eq!(demo.bank.runs(), 1);
    let booked: Vec<_> = demo
        .bank
        .bookings
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b.to == "ext-vendor-7")
        .cloned()
        .collect();
    assert_eq!(booked.len(), 1);
    assert_eq!(booked[0].cents, 2_000_000);
    let viewer = Principal::new("acme", "tina", "check").with_role("teller");
    let request = demo
        .desk
        .approvals()
        .get(&viewer, &transfer)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(request.state, ApprovalState::Executed);
    assert_eq!(
        request.binding_digest, binding,
        "the page showed the sealed digest"
    );
    let args = json!({"from_account": "chk-alice", "to_account": "ext-vendor-7",
        "amount": 2_000_000, "currency": "USD",
        "memo": "Invoice 2291 <marquee>alert('pwned')</marquee>",
        "idempotency_key": "key-call-transfer-1"});
    let retry = demo
        .desk
        .dispatch(
            ToolCall::new("call-transfer-1", "transfer_funds", args.to_string()),
            &app::alice(),
        )
        .await;
    assert_eq!(retry.status, Status::Ok);
    assert!(retry.replayed);
    assert_eq!(demo.bank.runs(), 1, "still exactly once");
    demo.audit.verify().expect("the audit chain verifies");
    let decisions = demo
        .audit
        .entries()
        .into_iter()
        .filter(|e| e.record.event == toolguard::audit::AuditEvent::Decision)
        .filter(|e| e.record.approver.as_deref() == Some("tina"))
        .count();
    assert_eq!(decisions, 1, "one audited decision by tina");

    // History lists it.
    c.goto(&format!("{base}/console/history")).await.unwrap();
    let row = text(&c, &format!("tr[data-id='{transfer}']")).await;
    assert!(row.contains("executed") && row.contains("tina"), "{row}");
    sign_out(&c).await;

    // The requester is refused.
    sign_in(&c, &base, "alice").await;
    assert_eq!(text(&c, "h1").await, "Not allowed");
    assert!(
        text(&c, "#refusal")
            .await
            .contains("for the roles teller, compliance")
    );
    c.goto(&format!("{base}/console/requests/{wire}"))
        .await
        .unwrap();
    assert_eq!(text(&c, "h1").await, "Not allowed");
    shot(&c, "refused").await;
    c.find(Locator::Css("main form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait().for_element(Locator::Id("login")).await.unwrap();

    // Dual control: tina gives the first approval, omar the second.
    sign_in(&c, &base, "tina").await;
    open_request(&c, &base, &wire).await;
    assert!(text(&c, "#progress").await.contains("0 of 2"));
    approve(&c).await;
    assert_eq!(text(&c, "#outcome-status").await, "pending_approval");
    assert!(text(&c, "main").await.contains("1 of 2 approvals"));
    open_request(&c, &base, &wire).await;
    assert!(
        text(&c, "#ineligible")
            .await
            .contains("you already decided")
    );
    sign_out(&c).await;
    sign_in(&c, &base, "omar").await;
    open_request(&c, &base, &wire).await;
    assert!(text(&c, "#progress").await.contains("1 of 2"));
    shot(&c, "dual-control").await;
    approve(&c).await;
    assert_eq!(text(&c, "#outcome-status").await, "ok");
    let wired = demo
        .bank
        .bookings
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b.to == "de-89370400440532013000")
        .count();
    assert_eq!(
        wired, 1,
        "the wire executed once, after the second approval"
    );

    c.close().await.unwrap();
}
