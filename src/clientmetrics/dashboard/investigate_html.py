"""HTML of the investigate pages: login, find form and hits, watch form, live view."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape
from urllib.parse import quote

from clientmetrics.dashboard.operators import Session
from clientmetrics.dashboard.watching import LiveWatch
from clientmetrics.investigate.find import ClientHit
from clientmetrics.investigate.watches import STANDARD_PREFIXES

__all__ = ["find_body", "live_body", "login_body"]

_LABELS = {
    "client_id": "client.id",
    "client_id_pattern": "client.id pattern",
    "principal": "principal",
    "source_address": "source address",
    "software_name": "software name",
    "software_version": "software version",
    "group": "consumer group",
}


def _csrf(session: Session) -> str:
    return f'<input type=hidden name=csrf value="{escape(session.csrf)}">'


def login_body(enabled: bool, session: Session | None) -> str:
    """Who is logged in, or the login form; a note when write actions are off."""
    if not enabled:
        return "<p class=muted id=readonly>Write actions are off (read-only dashboard).</p>"
    if session is not None:
        return (
            f"<form method=post action=/investigate/logout id=logout>{_csrf(session)}"
            f"<span id=operator>Logged in as {escape(session.operator)}</span> "
            "<button>Log out</button></form>"
        )
    return (
        "<form method=post action=/investigate/login id=login>"
        "<label>User <input name=username autocomplete=username></label> "
        "<label>Password <input name=password type=password autocomplete=current-password>"
        "</label> <button>Log in</button></form>"
    )


def find_body(
    query: Mapping[str, str],
    hits: Sequence[ClientHit] | None,
    session: Session | None,
    watches: Sequence[LiveWatch],
) -> str:
    """The find form, its hits (with the watch form when logged in) and the watches."""
    inputs = "".join(
        f'<label>{label} <input name={key} value="{escape(query.get(key, ""))}"></label> '
        for key, label in _LABELS.items()
    )
    parts = [f"<form method=get action=/investigate id=find>{inputs}<button>Find</button></form>"]
    if hits is not None:
        parts.append(_hits(hits))
        if hits and session is not None:
            parts.append(_watch_form(query, hits, session))
    if watches:
        rows = "".join(
            f'<tr><td><a href="/investigate/watch/{quote(lw.watch.name)}">'
            f"{escape(lw.watch.name)}</a></td><td>{escape(lw.started_by)}</td>"
            f"<td>{escape(lw.watch.expires_text)}</td>"
            f"<td>{'stopped' if lw.stopped_at else 'running'}</td></tr>"
            for lw in watches
        )
        parts.append(
            "<h2>Watches</h2><table id=watches><thead><tr><th>watch</th><th>started by</th>"
            f"<th>ends</th><th>state</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    return "".join(parts)


def _hits(hits: Sequence[ClientHit]) -> str:
    rows = []
    for h in hits:
        last = time.strftime("%H:%M:%S", time.gmtime(h.last_push_ms / 1000))
        cells = (
            h.client_instance_id, h.client_id, h.software, h.principal,
            ",".join(h.source_addresses), h.group or "-", h.state, f"{last}Z",
            ",".join(h.metric_types) or "-", _or_dash(h.subscription_id),
            ",".join(h.subscriptions) or "-", str(h.last_push_metrics),
        )  # fmt: skip
        rows.append("<tr class=hit>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
    head = ("instance", "client.id", "software", "principal", "addresses", "group", "state",
            "last push", "types", "subscription id", "subscriptions",
            "metrics in last push")  # fmt: skip
    header = "".join(f"<th>{h}</th>" for h in head)
    return (
        f"<p id=found>{len(hits)} client instance(s)</p><table id=hits><thead><tr>{header}"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _watch_form(query: Mapping[str, str], hits: Sequence[ClientHit], session: Session) -> str:
    """Watch what was searched by client id and address; the prefix is the hits' type's."""
    types = {t for h in hits for t in h.metric_types}
    kind = "consumer" if "consumer" in types or not types else sorted(types)[0]
    prefix = STANDARD_PREFIXES.get(kind, STANDARD_PREFIXES["any"])
    keep = "".join(
        f'<input type=hidden name={k} value="{escape(query[k])}">'
        for k in ("client_id", "source_address")
        if query.get(k)
    )
    return (
        f"<form method=post action=/investigate/watch id=watch>{_csrf(session)}{keep}"
        f'<label>Metrics <input name=metrics value="{escape(prefix)}" size=36></label> '
        "<label>Interval (s) <input name=interval_s value=10 size=4></label> "
        "<label>Expires (min) <input name=expires_min value=30 size=4></label> "
        "<button>Watch</button></form>"
    )


_LIVE_JS = """
const box=document.getElementById('live');const name=box.dataset.name;let after=-1;
const rows=new Map();const tbody=document.querySelector('#points tbody');
function row(p){const key=p.instance+'|'+p.metric+'|'+(p.node??'');let tr=rows.get(key);
 if(!tr){tr=document.createElement('tr');
  for(let i=0;i<6;i++)tr.appendChild(document.createElement('td'));
  tr.dataset.instance=p.instance;tr.dataset.metric=p.metric;rows.set(key,tr);tbody.appendChild(tr);}
 const c=tr.children;c[0].textContent=p.instance;c[1].textContent=p.metric;
 c[2].textContent=p.value===null?'-':String(+p.value.toPrecision(6));c[3].textContent=p.unit;
 c[4].textContent=p.node===null?'':'node.id='+p.node;
 c[5].textContent=new Date(p.at_ms).toISOString().substring(11,23);tr.dataset.seq=p.seq;
 tr.hidden=!p.metric.includes(filter.value);}
const filter=document.getElementById('filter');
filter.addEventListener('input',()=>{for(const tr of rows.values())
 tr.hidden=!tr.dataset.metric.includes(filter.value);});
async function poll(){try{
 const r=await fetch('/investigate/live/'+encodeURIComponent(name)+'?after='+after,
 {credentials:'same-origin'});if(r.ok){const d=await r.json();for(const p of d.points){row(p);}
 if(d.points.length)after=d.next;window.lastSeq=after;
 document.getElementById('state').textContent=d.stopped?'stopped':'watching';
 const back=document.getElementById('back');back.replaceChildren();
 for(const b of d.back){const li=document.createElement('li');li.className='back';
  li.textContent=b.instance+' back on '+b.text;
  back.appendChild(li);}}}catch(e){}setTimeout(poll,250);}
poll();
"""


def live_body(live: LiveWatch, session: Session | None) -> str:
    """The live view: one row per instance, metric and node, updated as points arrive."""
    name = escape(live.watch.name)
    controls = ""
    if session is not None and live.stopped_at is None:
        stop = (
            f"<form method=post action=/investigate/stop id=stop>{_csrf(session)}"
            f'<input type=hidden name=name value="{name}"><button>Stop</button></form>'
        )
        narrow = (
            f"<form method=post action=/investigate/narrow id=narrow>{_csrf(session)}"
            f'<input type=hidden name=name value="{name}">'
            "<label>Narrow to instance <input name=instance size=38></label> "
            "<button>Narrow</button></form>"
        )
        controls = narrow + stop
    match = ", ".join(f"{k}={v}" for k, v in sorted(live.selectors.items()))
    return (
        f'<div id=live data-name="{name}"><p>State: <b id=state>watching</b> · started by '
        f"{escape(live.started_by)} · ends {escape(live.watch.expires_text)} · match "
        f"<code id=match>{escape(match)}</code> · metrics {escape(', '.join(live.metrics))}</p>"
        f"{controls}<ul id=back></ul><label>Show metrics containing <input id=filter "
        "size=40></label><table id=points><thead><tr><th>instance</th>"
        "<th>metric</th><th>value</th><th>unit</th><th>broker</th><th>pushed</th></tr></thead>"
        f"<tbody></tbody></table></div><script>{_LIVE_JS}</script>"
    )


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)
