//! `cpflow lsp` over the protocol: a client session (initialize, open a
//! buggy file, diagnostics, hover, definition, a fixing edit, shutdown)
//! against the server on an in-memory connection, and the same handshake
//! against the `cpflow lsp` process over stdio.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use lsp_server::{Connection, Message, Notification, Request, RequestId};
use serde_json::{json, Value};

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect("file reads")
}

fn uri(path: &str) -> String {
    format!("file:///work/{path}")
}

/// The LSP position (line, UTF-16 column) of the `nth` match of `needle`
/// (ASCII test files), shifted by `skip` bytes.
fn position(text: &str, needle: &str, nth: usize, skip: usize) -> Value {
    let at = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` #{nth} in the text"))
        .0
        + skip;
    let line = text[..at].matches('\n').count();
    let col = at - text[..at].rfind('\n').map_or(0, |i| i + 1);
    json!({ "line": line, "character": col })
}

struct Client {
    conn: Connection,
    next: i32,
}

impl Client {
    fn recv(&self) -> Message {
        self.conn
            .receiver
            .recv_timeout(Duration::from_secs(60))
            .expect("the server answers")
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = RequestId::from(self.next);
        let req = Request::new(id.clone(), method.to_string(), params);
        self.conn.sender.send(req.into()).expect("send");
        loop {
            if let Message::Response(r) = self.recv() {
                assert_eq!(r.id, id);
                assert!(r.error.is_none(), "{:?}", r.error);
                return r.result.unwrap_or(Value::Null);
            }
        }
    }

    fn notify(&self, method: &str, params: Value) {
        let n = Notification::new(method.to_string(), params);
        self.conn.sender.send(n.into()).expect("send");
    }

    /// The next diagnostics the server publishes.
    fn diagnostics(&self) -> Value {
        loop {
            if let Message::Notification(n) = self.recv() {
                if n.method == "textDocument/publishDiagnostics" {
                    return n.params;
                }
            }
        }
    }

    fn open(&self, path: &str, text: &str) -> Value {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri(path), "languageId": "cpflow", "version": 1, "text": text } }),
        );
        self.diagnostics()
    }

    fn hover(&mut self, path: &str, at: Value) -> String {
        let h = self.request(
            "textDocument/hover",
            json!({ "textDocument": { "uri": uri(path) }, "position": at }),
        );
        h["contents"]["value"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

#[test]
fn a_session_diagnoses_hovers_and_jumps() {
    let (server, conn) = Connection::memory();
    let thread = std::thread::spawn(move || cpflow::lsp::serve(&server).map_err(|e| e.to_string()));
    let mut c = Client { conn, next: 0 };
    let init = c.request("initialize", json!({ "capabilities": {} }));
    assert_eq!(init["capabilities"]["hoverProvider"], true);
    assert_eq!(init["capabilities"]["definitionProvider"], true);
    assert_eq!(init["capabilities"]["textDocumentSync"], 1);
    c.notify("initialized", json!({}));

    // A wait one too weak: E1002 at the load it leaves unprotected.
    let buggy_path = "tests/check/E1002-wait-too-weak.cpf";
    let buggy = read(buggy_path);
    let d = c.open(buggy_path, &buggy);
    assert_eq!(d["uri"], uri(buggy_path));
    let diags = d["diagnostics"].as_array().expect("diagnostics");
    let e = diags
        .iter()
        .find(|d| d["code"] == "E1002")
        .expect("E1002 reported");
    assert_eq!(e["severity"], 1);
    assert_eq!(e["source"], "cpflow");
    assert_eq!(e["range"]["start"], position(&buggy, "%x = ld", 0, 0));
    let direct = cpflow::check(&buggy).diagnostics;
    assert_eq!(diags.len(), direct.len());
    let h = c.hover(buggy_path, position(&buggy, "cp.async.wait_group 2", 0, 2));
    assert!(
        h.contains("waits until at most 2 of this thread's newest groups"),
        "{h}"
    );

    // The fixing edit: the diagnostics clear.
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri(buggy_path), "version": 2 },
                "contentChanges": [{ "text": read("tests/check/E1002-wait-too-weak.ok.cpf") }] }),
    );
    assert_eq!(c.diagnostics()["diagnostics"], json!([]));

    // A wait on a loop-carried group: the derived N and the group.
    let pipe_path = "examples/cp_async_pipeline.cpf";
    let pipe = read(pipe_path);
    assert_eq!(c.open(pipe_path, &pipe)["diagnostics"], json!([]));
    let h = c.hover(pipe_path, position(&pipe, "cp.async.wait_group %p0", 0, 3));
    assert!(h.contains("derived **`cp.async.wait_group 2`**"), "{h}");
    assert!(h.contains("the loop-carried group `%p0`"), "{h}");
    let h = c.hover(
        pipe_path,
        position(&pipe, "%g0 = cp.async.commit_group", 0, 1),
    );
    assert!(h.contains("%g0: group"), "{h}");
    assert!(h.contains("an async-group of 1 op (`%t0`)"), "{h}");

    // A TMA ring: phase values, their parity, a token's completion.
    let ring_path = "examples/tma_ring.cpf";
    let ring = read(ring_path);
    assert_eq!(c.open(ring_path, &ring)["diagnostics"], json!([]));
    let h = c.hover(ring_path, position(&ring, "mbarrier.wait %ready", 0, 16));
    assert!(h.contains("%ready: phase<shared>"), "{h}");
    assert!(
        h.contains("phase `%cround` of `%cf`: waits on it use parity `%cround` & 1"),
        "{h}"
    );
    let h = c.hover(ring_path, position(&ring, "mbarrier.wait %ready", 0, 2));
    assert!(h.contains("waits for `%ready`"), "{h}");
    let h = c.hover(ring_path, position(&ring, "%t = cp.async.bulk", 0, 1));
    assert!(
        h.contains("complete-tx on the mbarrier phase `%loaded`"),
        "{h}"
    );

    // Go to the definition of a use of `%loaded`.
    let def = c.request(
        "textDocument/definition",
        json!({ "textDocument": { "uri": uri(ring_path) },
                "position": position(&ring, "%loaded", 1, 2) }),
    );
    assert_eq!(def["uri"], uri(ring_path));
    assert_eq!(def["range"]["start"], position(&ring, "%loaded", 0, 0));

    // Unknown documents and positions get no answer, not an error.
    assert_eq!(
        c.request(
            "textDocument/hover",
            json!({ "textDocument": { "uri": uri("nowhere.cpf") },
                    "position": { "line": 0, "character": 0 } })
        ),
        Value::Null
    );
    let past = json!({ "line": 9999, "character": 9999 });
    assert_eq!(c.hover(ring_path, past), "");

    c.request("shutdown", Value::Null);
    c.notify("exit", Value::Null);
    assert_eq!(thread.join().expect("server thread"), Ok(()));
}

/// One framed JSON-RPC message.
fn frame(v: &Value) -> String {
    let body = v.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len())
}

fn read_message(r: &mut impl BufRead) -> Value {
    let mut len = 0;
    loop {
        let mut line = String::new();
        r.read_line(&mut line).expect("header line");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(n) = line.strip_prefix("Content-Length: ") {
            len = n.parse().expect("length");
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).expect("body");
    serde_json::from_slice(&body).expect("JSON body")
}

#[test]
fn the_binary_speaks_lsp_on_stdio() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cpflow"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cpflow lsp starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let text = read("tests/check/E1002-wait-too-weak.cpf");
    let script = [
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "capabilities": {} } }),
        json!({ "jsonrpc": "2.0", "method": "initialized", "params": {} }),
        json!({ "jsonrpc": "2.0", "method": "textDocument/didOpen", "params": { "textDocument":
            { "uri": "file:///a.cpf", "languageId": "cpflow", "version": 1, "text": text } } }),
    ];
    for m in &script {
        stdin.write_all(frame(m).as_bytes()).expect("write");
    }
    stdin.flush().expect("flush");
    let init = read_message(&mut stdout);
    assert_eq!(init["id"], 1);
    assert_eq!(init["result"]["serverInfo"]["name"], "cpflow");
    let d = read_message(&mut stdout);
    assert_eq!(d["method"], "textDocument/publishDiagnostics");
    assert_eq!(d["params"]["diagnostics"][0]["code"], "E1002");
    let end = [
        json!({ "jsonrpc": "2.0", "id": 2, "method": "shutdown" }),
        json!({ "jsonrpc": "2.0", "method": "exit" }),
    ];
    for m in &end {
        stdin.write_all(frame(m).as_bytes()).expect("write");
    }
    drop(stdin);
    assert_eq!(read_message(&mut stdout)["id"], 2);
    assert!(child.wait().expect("exit").success());
}
