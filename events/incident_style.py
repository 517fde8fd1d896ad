"""The stylesheet of the HTML incident page (``events.incident_html``), inlined in the page.

Fixed text, no data: the page's colors are CSS variables named after the stage kinds and
the marks (``--tool_call``, ``--denial``, ``--security``, ...), which the markup picks by
those fixed names only. On a window narrower than 1000 px the stage column narrows and
the time axis shows every other label (``.ticks .odd``), so the labels never touch.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CSS"]

CSS: Final = """
:root{--ink:#1d2330;--muted:#5d6779;--line:#e3e7ee;--bg:#f6f7fb;--card:#fff;
--turn:#64748b;--model_round:#7c5cd6;--policy:#0f9d8f;--approval:#d69e16;--tool_call:#2f6fde;
--denial:#e07b14;--failure:#d6333f;--timeout:#b3261e;--crash:#8e1b5a;--restart:#8e1b5a;
--cancel:#6b7280;--security:#b02fb0;--open:#9aa3b2}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px 28px 40px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:0 0 12px}
h3{font-size:14px;margin:14px 0 4px}h3:first-of-type{margin-top:0}
code,pre,.mono{font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,monospace;
font-size:12.5px}
a{color:#2454b8;text-decoration:none}a:hover{text-decoration:underline}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;
padding:16px 18px;margin:16px 0}
.sub{color:var(--muted);margin:0}
.facts{display:flex;flex-wrap:wrap;gap:8px 22px;margin:14px 0 0;padding:0;list-style:none}
.facts b{font-weight:600}
.badge{display:inline-block;padding:1px 9px;border-radius:999px;color:#fff;font-weight:600;
font-size:12px;vertical-align:2px;background:var(--turn)}
.badge.error{background:var(--failure)}.badge.ok{background:#1f8a4c}
.badge.cancelled{background:var(--cancel)}.badge.in_progress{background:var(--approval)}
.chips{margin:12px 0 0;display:flex;flex-wrap:wrap;gap:8px}
.chip{border:1px solid var(--c);color:var(--c);border-radius:999px;padding:1px 10px;
font-size:12.5px;font-weight:600;background:#fff}
.first{border-left:5px solid var(--failure);background:#fff5f5}
.first p{margin:4px 0 0;overflow-wrap:anywhere}
.none{color:var(--muted);margin:0}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin:0 0 12px;color:var(--muted);
font-size:12px}
.legend span::before{content:"";display:inline-block;width:12px;height:8px;border-radius:2px;
margin-right:5px;background:var(--c)}
.wf{border-top:1px solid var(--line)}
.row{display:grid;grid-template-columns:minmax(0,380px) minmax(0,1fr) 76px;gap:10px;
align-items:center;min-height:24px;border-bottom:1px solid var(--line)}
.row:hover{background:#f3f6fc}
.name{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;font-size:12.5px}
.kind{display:inline-block;min-width:74px;color:var(--muted);font-size:11px;
text-transform:uppercase;letter-spacing:.03em}
.track{position:relative;height:24px;background:repeating-linear-gradient(90deg,
transparent 0,transparent calc(25% - 1px),var(--line) calc(25% - 1px),var(--line) 25%)}
.bar{position:absolute;top:6px;height:12px;min-width:3px;border-radius:3px;
background:var(--c,var(--turn))}
.bar.open{background:repeating-linear-gradient(45deg,var(--open) 0 5px,#c8ced8 5px 10px)}
.pin{position:absolute;top:4px;width:14px;height:14px;margin-left:-7px;transform:rotate(45deg);
background:var(--c);border:2px solid #fff;box-shadow:0 0 0 1px var(--c)}
.ms{text-align:right;color:var(--muted);font-size:12px;white-space:nowrap}
.axis{display:grid;grid-template-columns:minmax(0,380px) minmax(0,1fr) 76px;gap:10px;
color:var(--muted);font-size:11px}
.ticks{position:relative;height:16px}
.ticks span{position:absolute;transform:translateX(-50%);white-space:nowrap}
.ticks span:first-child{transform:none}.ticks span:last-child{transform:translateX(-100%)}
@media (max-width:1000px){.row,.axis{grid-template-columns:minmax(0,240px) minmax(0,1fr) 64px}
.ticks .odd{display:none}}
.note{color:var(--muted);font-size:12px;margin:8px 0 0}
.tree .ran{color:var(--muted)}
.mark{color:var(--c);font-weight:600}
.first-error{outline:2px solid var(--failure);outline-offset:-2px;background:#fff0f0}
.tree{list-style:none;margin:0;padding:0}
.tree li{padding:2px 6px;border-left:2px solid transparent;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis}
.tree li[data-mark]{border-left-color:var(--c);background:#fbfbfd}
.tree .seq{color:var(--muted);display:inline-block;min-width:52px}
.tree .t{font-weight:600}.tree .guide{color:#b7bfcc}
.tree .at{color:var(--muted);float:right;padding-left:12px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600;font-size:12px}
td.n{text-align:right}
.entries{list-style:none;margin:0;padding:0}
.entries li{padding:4px 0;border-bottom:1px solid var(--line)}
details summary{cursor:pointer;color:var(--muted);font-size:12px}
pre{background:#f3f4f8;border-radius:6px;padding:8px 10px;margin:6px 0;white-space:pre-wrap;
word-break:break-all;max-height:320px;overflow:auto}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:16px;align-items:start}
.grid2 section{margin:0}
footer{color:var(--muted);font-size:12px;text-align:center}
"""
"""The page's whole stylesheet."""
