"""Takes docs/images/mlflow_sweep.png: the MLflow UI's runs table of a torchhost sweep, the parent
run expanded to its cells, with a loss, an accuracy and the swept lr as columns.

Headless Chromium (Debian's `chromium`) driven over its DevTools protocol with aiohttp (in
.venv-mlflow, a dependency of mlflow), since the page is a React app that needs clicks: expand the
parent, close the assistant panel, pick the columns. How the figure in
docs/experiment_tracking.md was made:
  mlflow server --host 127.0.0.1 --port 5055 ...   (any server)
  host sweep --config configs/quickstart.toml --output-dir /tmp/s/quickstart-lr-sweep \
    --set train.epochs=3 --set data.train.size=2560 --set logging.mlflow.enabled=true \
    --set 'logging.mlflow.tracking_uri="http://127.0.0.1:5055"' \
    --set 'logging.mlflow.experiment="quickstart-lr-sweep"' --grid optim.lr=0.01,0.003,0.0003
  .venv-mlflow/bin/python scripts/mlflow_screenshot.py http://127.0.0.1:5055 <experiment id> docs/images/mlflow_sweep.png
"""
import asyncio
import base64
import json
import subprocess
import sys
import time
import urllib.request

import aiohttp

SERVER, EXPERIMENT, OUTPUT = sys.argv[1], sys.argv[2], sys.argv[3]
COLUMNS = r"^(epoch\/val\/accuracy|optim\.lr|epoch\/train\/loss)$"
STEPS = [
    # Expand the parent run; close the assistant panel.
    "document.querySelector('button[data-component-id*=\"runnamecellrenderer\"]').click();"
    "document.querySelectorAll('button[aria-label=\"Close\"]').forEach(b => b.click()); 'expanded'",
    "document.querySelector('button[data-testid=\"column-selection-dropdown\"]').click(); 'columns'",
    "Array.from(document.querySelectorAll('[role=dialog] *')).filter(e => e.children.length == 0 && "
    f"/{COLUMNS}/.test(e.textContent.trim())).map(e => {{ e.click(); return e.textContent; }}).join(',')",
    "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true})); document.body.click(); 'done'",
]


async def capture(websocket_url):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(websocket_url, max_msg_size=0) as sock:
            ids = iter(range(1, 1000))

            async def call(method, **params):
                n = next(ids)
                await sock.send_json({"id": n, "method": method, "params": params})
                while True:
                    message = await sock.receive_json()
                    if message.get("id") == n:
                        return message

            await call("Page.enable")
            await call("Page.navigate", url=f"{SERVER}/#/experiments/{EXPERIMENT}/runs")
            await asyncio.sleep(8)  # the app loads and renders the table
            for step in STEPS:
                answer = await call("Runtime.evaluate", expression=step, returnByValue=True)
                print(answer.get("result", {}).get("result", {}).get("value"))
                await asyncio.sleep(2)
            shot = await call("Page.captureScreenshot", format="png")
            with open(OUTPUT, "wb") as f:
                f.write(base64.b64decode(shot["result"]["data"]))


chrome = subprocess.Popen(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--remote-debugging-port=9333", "--window-size=1700,620", "about:blank"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(100):
        try:
            pages = json.load(urllib.request.urlopen("http://127.0.0.1:9333/json"))
            break
        except OSError:
            time.sleep(0.2)
    asyncio.run(capture([p for p in pages if p["type"] == "page"][0]["webSocketDebuggerUrl"]))
finally:
    chrome.kill()
