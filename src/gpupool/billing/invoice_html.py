"""A printable invoice page in Chinese or English (pure: the invoice dict in, HTML out).
Every label comes from ``LABELS``; line descriptions are built from each line's ``item`` so no
English is left on the Chinese page."""

from datetime import datetime
from zoneinfo import ZoneInfo

from jinja2 import Environment, PackageLoader

from gpupool.billing.invoice import DEFAULT_ZONE, local_span
from gpupool.billing.money import parse_cny, yuan
from gpupool.model import SpecError

LANGS = ("zh", "en")
# Served with the invoice: a static document runs no script at all, loads nothing, and is
# framed by nobody (its own <style> is its only style)
DOCUMENT_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
LABELS: dict[str, dict[str, str]] = {
    "zh": {
        "title": "账单",
        "title.showback": "费用报告（内部核算，不收费）",
        "tenant": "租户",
        "period": "账期",
        "zone": "时区",
        "mode": "计费方式",
        "item": "项目",
        "quantity": "数量",
        "unit": "单位",
        "unit_price": "单价（元）",
        "amount": "金额（元）",
        "total": "合计（人民币）",
        "draft": "草稿：本账期尚未结束，金额为截至目前（含运行中的作业），会变化",
        "as_of": "统计至 {time}",
        "empty": "本账期没有计费的用量",
        "issued": "生成于",
        "card-hour": "卡时",
        "GB-hour": "GB·时",
        "job": "个任务",
        "card-hour.plan": "卡·小时",
        "card-day": "卡·天",
        "card-month": "卡·月",
        "card-year": "卡·年",
        "number": "账单编号",
        "final": "正式账单",
        "mode.card-hour": "按卡时",
        "mode.gpu-mem": "按显存",
        "mode.per-task": "按任务",
        "note": "一卡时 = 一张整卡使用一小时；共享卡与 MIG 切片按其算力比例计。",
        "issuer": "开票方",
        "breakdown": "用量明细",
        "summary": "共 {total} 卡时：保障额度内 {guaranteed}，借用他人空闲 {borrowed}",
        "by_user": "按用户",
        "by_job": "用量最大的作业",
        "user": "用户",
        "jobs": "作业数",
        "job_id": "作业",
        "name": "名称",
        "hours": "卡时",
        "lent": "其中借用",
        "left_out": "另有 {n} 个作业未列出（JSON 与 CSV 导出含全部）",
        "sub_teams": "下级团队（各自出账，不计入本账单合计）",
        "team": "团队",
    },
    "en": {
        "title": "Invoice",
        "title.showback": "Cost report (showback, not billed)",
        "tenant": "Tenant",
        "period": "Period",
        "zone": "Time zone",
        "mode": "Billing mode",
        "item": "Item",
        "quantity": "Quantity",
        "unit": "Unit",
        "unit_price": "Unit price (CNY)",
        "amount": "Amount (CNY)",
        "total": "Total (CNY)",
        "draft": "Draft: the period is not over; amounts so far (running jobs included)",
        "as_of": "counted to {time}",
        "empty": "No billable usage in this period",
        "issued": "Issued",
        "card-hour": "card-hours",
        "GB-hour": "GB-hours",
        "job": "jobs",
        "card-hour.plan": "card-hours",
        "card-day": "card-days",
        "card-month": "card-months",
        "card-year": "card-years",
        "number": "Invoice number",
        "final": "Final",
        "mode.card-hour": "by card-hour",
        "mode.gpu-mem": "by GPU memory",
        "mode.per-task": "by task",
        "note": "A card-hour is one whole card for one hour; shared cards and MIG slices count "
        "their compute fraction.",
        "issuer": "Issued by",
        "breakdown": "Who used it",
        "summary": "{total} card-hours: {guaranteed} within the guarantee, {borrowed} on "
        "capacity borrowed from others",
        "by_user": "By user",
        "by_job": "Largest jobs",
        "user": "User",
        "jobs": "Jobs",
        "job_id": "Job",
        "name": "Name",
        "hours": "Card-hours",
        "lent": "Of which borrowed",
        "left_out": "{n} more jobs not listed",
        "sub_teams": "Sub-teams (billed on their own invoices, not in this total)",
        "team": "Team",
    },
}
TERMS = {
    "zh": {"hourly": "按小时", "daily": "按天", "monthly": "按月", "annual": "包年（85 折）"},
    "en": {
        "hourly": "hourly",
        "daily": "daily",
        "monthly": "monthly",
        "annual": "annual (15% off)",
    },
}
_ENV = Environment(
    # every template here is HTML: escape whatever the name ends with (a ".j2" name defeated
    # select_autoescape(["html"]) and a credit's reason became a script on the admin's screen)
    loader=PackageLoader("gpupool.billing", "templates"),
    autoescape=True,
)


DESCRIPTIONS = {
    "zh": {
        "plan": "租用套餐 {plan}：{cards} 张 {model}，{term}{cancelled}",
        "beyond": "{model} 超出套餐的用量",
        "tasks": "{class} 类任务",
        "discount": "用量折扣 {pct}%",
        "credit": "抵扣：{reason}{partial}",
        "plan-cancellation": "租用套餐 {plan} 提前终止：按已开始的 {started}/{steps} "
        "个{step}计费{no_discount}，扣除已计费部分",
        "usage": "{model} 用量",
    },
    "en": {
        "plan": "Rental plan {plan}: {cards} x {model}, {term}{cancelled}",
        "beyond": "{model} used beyond the plans",
        "tasks": "{class} jobs",
        "discount": "Discount {pct}% on usage",
        "credit": "Credit: {reason}{partial}",
        "plan-cancellation": "Rental plan {plan} cancelled early: owes {started} of {steps} "
        "{step}s started{no_discount}, less what was billed",
        "usage": "{model} usage",
    },
}
CANCELLED = {"zh": "（已提前终止）", "en": " (cancelled early)"}
SPAN = {"zh": ("（{span}）", "至"), "en": (", {span}", "to")}  # a price in force part of a month
PARTIAL = {
    "zh": "（共 ¥{credit}，本期抵扣 ¥{applied}，账单不低于零）",
    "en": " (¥{credit}; ¥{applied} applies, an invoice never goes below zero)",
}
STEPS = {
    "zh": {"month": "月", "hour": "小时", "day": "天", "year": "年"},
    "en": {"month": "month", "hour": "hour", "day": "day", "year": "year"},
}
NO_DISCOUNT = {"zh": "（不享受包年折扣）", "en": " (without the annual discount)"}


def describe(item: dict, lang: str, zone: str = DEFAULT_ZONE) -> str:
    """A line's description in ``lang`` from its structured ``item`` (dated, in ``zone``,
    when its price was in force for part of the month)."""
    kind = item.get("kind")
    template = DESCRIPTIONS[lang].get(kind or "", DESCRIPTIONS[lang]["usage"])
    partial = item.get("applied") not in (None, item.get("credit"))
    values = {
        "model": "",
        **item,
        "term": TERMS[lang].get(item.get("term", ""), ""),
        "cancelled": CANCELLED[lang] if item.get("cancelled") else "",
        "partial": PARTIAL[lang].format_map(item) if partial else "",
        "step": STEPS[lang].get(item.get("step", ""), ""),
        "no_discount": NO_DISCOUNT[lang] if item.get("term") == "annual" else "",
    }
    text = template.format_map(values)
    if item.get("from") is not None and item.get("to") is not None:
        pattern, to = SPAN[lang]
        text += pattern.format(span=local_span(item["from"], item["to"], zone, to))
    return text


def _signed_fen(amount: str) -> int:
    """An invoice's ``"-250.00"`` back to fen (discounts and credits are negative)."""
    fen = parse_cny(amount.removeprefix("-"))
    return -fen if amount.startswith("-") else fen


def _month(month: str, lang: str) -> str:
    year, mm = month.split("-")
    if lang == "zh":
        return f"{year} 年 {int(mm)} 月"
    return datetime(int(year), int(mm), 1).strftime("%B %Y")


def invoice_html(inv: dict, lang: str = "zh", issued: float | None = None) -> str:
    if lang not in LANGS:
        raise SpecError(f"lang: {lang!r} is not one of {', '.join(LANGS)}", field="lang")
    t = LABELS[lang]
    when = datetime.fromtimestamp(issued or 0, ZoneInfo(inv["zone"]))
    lines = [
        {
            "what": describe(line.get("item") or {}, lang, inv["zone"]),
            "quantity": line["quantity"].rstrip("0").rstrip("."),
            "unit": t.get(line["unit"], line["unit"]),
            "unit_price": line["unit_price"],
            "amount": yuan(_signed_fen(line["amount"])),
        }
        for line in inv["lines"]
    ]
    title = t["title.showback"] if inv.get("kind") == "showback" else t["title"]
    return _ENV.get_template("invoice.html.j2").render(
        t=t,
        title=title,
        lang="zh-CN" if lang == "zh" else "en",
        tenant=inv["tenant"],
        period=_month(inv["month"], lang),
        zone=inv["zone"],
        mode=t.get(f"mode.{inv['mode']}", inv["mode"]),
        lines=lines,
        total=yuan(_signed_fen(inv["total"])),
        draft=inv.get("draft", False),
        as_of=t["as_of"].format(time=_stamp(inv["as_of"], inv["zone"])) if inv.get("as_of") else "",
        number=inv.get("number"),
        issued=when.strftime("%Y-%m-%d %H:%M"),
        issuer=inv.get("issuer", ""),
        breakdown=_breakdown(inv.get("breakdown"), t),
        sub_teams=[
            {
                **team,
                "card_hours": _hours(team["card_hours"]),
                "total": yuan(_signed_fen(team["total"])),
            }
            for team in inv.get("sub_teams") or []
        ],
    )


def _stamp(t: float, zone: str) -> str:
    """A moment in the invoice's zone with its offset: 2027-01-01 02:00 +08:00."""
    d = datetime.fromtimestamp(t, ZoneInfo(zone))
    z = d.strftime("%z")
    return f"{d:%Y-%m-%d %H:%M} {z[:3]}:{z[3:]}"


def _hours(text: str) -> str:
    return f"{float(text):,.2f}"


def _breakdown(b: dict | None, t: dict[str, str]) -> dict | None:
    """The breakdown's figures as the page prints them (two decimals), or None (an invoice
    issued before invoices carried one)."""
    if not b or b.get("card_hours") is None:
        return None
    return {
        "summary": t["summary"].format(
            total=_hours(b["card_hours"]),
            guaranteed=_hours(b["guaranteed_card_hours"]),
            borrowed=_hours(b["borrowed_card_hours"]),
        ),
        "users": [{**u, "card_hours": _hours(u["card_hours"])} for u in b["by_user"]],
        "jobs": [
            {
                **j,
                "card_hours": _hours(j["card_hours"]),
                "lent": _hours(j["borrowed_card_hours"]),
            }
            for j in b["by_job"]
        ],
        "left_out": t["left_out"].format(n=b["jobs_left_out"]) if b["jobs_left_out"] else "",
    }
