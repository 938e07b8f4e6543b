"""The inline style and script of ``report.html`` (one offline file: nothing is fetched).

The script only filters what is already on the page: by verdict, by area, and by a
search over requirement ids and statements. Without it every requirement stays shown.
"""

from __future__ import annotations

__all__ = ["SCRIPT", "STYLE"]

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1rem auto 3rem;max-width:76rem;padding:0 1rem;
color:#1d1d1f;background:#fff}
h1{font-size:1.4rem;margin:.5rem 0}h2{font-size:1.15rem;margin-top:1.6rem;
border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.2rem .5rem;
text-align:left;vertical-align:top}
pre{background:#f6f6f6;border:1px solid #e2e2e2;padding:.5rem;overflow-x:auto;
white-space:pre-wrap;word-break:break-all;font-size:12px}
details{margin:.3rem 0}summary{cursor:pointer}
.banner{border-radius:6px;padding:.8rem 1rem;color:#fff;margin:.5rem 0 1rem}
.banner.ok{background:#2e7d32}.banner.bad{background:#c62828}
.banner .headline{font-size:1.5rem;font-weight:700;margin:0}
.banner p{margin:.3rem 0}.banner a{color:#fff}
.banner .counts span{display:inline-block;margin-right:1rem}
.req{border:1px solid #ddd;border-left-width:6px;border-radius:4px;padding:.3rem .6rem;
margin:.5rem 0}
.badge{display:inline-block;min-width:4.5rem;text-align:center;border-radius:3px;
padding:0 .3rem;font-weight:600;color:#fff}
.v-fail{background:#c62828;border-color:#c62828}.v-error{background:#6a1b9a;border-color:#6a1b9a}
.v-warn{background:#ef6c00;border-color:#ef6c00}.v-pass{background:#2e7d32;border-color:#2e7d32}
.v-skip{background:#757575;border-color:#757575}
.v-untested,.v-unobservable{background:#455a64;border-color:#455a64}
.req.v-fail,.req.v-error,.req.v-warn,.req.v-pass,.req.v-skip,.req.v-untested,
.req.v-unobservable{background:#fff}
.muted{color:#666}.ctl{color:#b00020;background:#fde7ea}
.filters{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:.4rem 0;
z-index:1}.filters label{margin-right:.7rem;white-space:nowrap}
.filters input[type=search]{width:18rem}
.hidden{display:none}
svg .grid{stroke:#e0e0e0}svg .tick{font-size:10px;fill:#555;text-anchor:middle}
svg .tick.end{text-anchor:end}svg .label{font-size:11px;fill:#222}
svg .window{fill:#c8e6c9;stroke:#2e7d32}svg .forbidden{fill:#ffcdd2}
svg .held{fill:#90a4ae}svg .timeout{stroke:#c62828;stroke-width:2;stroke-dasharray:3 2}
svg .arrival.on-time{fill:#1b5e20}svg .arrival.late{fill:#c62828}
svg .served{fill:#1565c0}svg .limited{fill:#c62828}
.legend{font-size:12px;color:#555}
"""

SCRIPT = """
(function(){
var boxes=document.querySelectorAll('.filters input[name=verdict]');
var area=document.getElementById('f-area'),text=document.getElementById('f-text');
var shown=document.getElementById('f-shown');
function apply(){
 var want={};boxes.forEach(function(b){want[b.value]=b.checked;});
 var a=area.value,q=text.value.trim().toLowerCase(),n=0;
 document.querySelectorAll('.req').forEach(function(r){
  var ok=want[r.dataset.verdict]&&(!a||r.dataset.area===a)&&
   (!q||r.dataset.search.indexOf(q)>=0);
  r.classList.toggle('hidden',!ok);if(ok){n++;}
 });
 document.querySelectorAll('.area').forEach(function(s){
  s.classList.toggle('hidden',!s.querySelector('.req:not(.hidden)'));
 });
 shown.textContent=n+' shown';
}
boxes.forEach(function(b){b.addEventListener('change',apply);});
area.addEventListener('change',apply);text.addEventListener('input',apply);apply();
})();
"""
