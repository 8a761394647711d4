"""A printable invoice page in Chinese or English (pure: the invoice dict in, HTML out).
Every label comes from ``LABELS``; line descriptions are built from each line's ``item`` so no
English is left on the Chinese page."""

from datetime import datetime
from zoneinfo import ZoneInfo

from jinja2 import Environment, PackageLoader, select_autoescape

from gpupool.model import SpecError

LANGS = ("zh", "en")
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
        "draft": "草稿：本账期尚未结束，金额会变化",
        "empty": "本账期没有计费的用量",
        "issued": "生成于",
        "card-hour": "卡时",
        "GB-hour": "GB·时",
        "job": "个任务",
        "mode.card-hour": "按卡时",
        "mode.gpu-mem": "按显存",
        "mode.per-task": "按任务",
        "note": "一卡时 = 一张整卡使用一小时；共享卡与 MIG 切片按其算力比例计。",
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
        "draft": "Draft: the period is not over, amounts will change",
        "empty": "No billable usage in this period",
        "issued": "Issued",
        "card-hour": "card-hours",
        "GB-hour": "GB-hours",
        "job": "jobs",
        "mode.card-hour": "by card-hour",
        "mode.gpu-mem": "by GPU memory",
        "mode.per-task": "by task",
        "note": "A card-hour is one whole card for one hour; shared cards and MIG slices count "
        "their compute fraction.",
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
    loader=PackageLoader("gpupool.billing", "templates"), autoescape=select_autoescape(["html"])
)


def describe(item: dict, lang: str) -> str:
    """A line's description in ``lang`` from its structured ``item``."""
    kind, model = item.get("kind"), item.get("model", "")
    if lang == "zh":
        if kind == "plan":
            cancelled = "（已提前终止）" if item.get("cancelled") else ""
            term = TERMS["zh"].get(item.get("term", ""), "")
            return f"租用套餐 {item['plan']}：{item['cards']} 张 {model}，{term}{cancelled}"
        if kind == "beyond":
            return f"{model} 超出套餐的用量"
        if kind == "tasks":
            return f"{item['class']} 类任务"
        if kind == "discount":
            return f"用量折扣 {item['pct']}%"
        if kind == "credit":
            return f"抵扣：{item['reason']}"
        return f"{model} 用量"
    if kind == "plan":
        cancelled = " (cancelled early)" if item.get("cancelled") else ""
        term = TERMS["en"].get(item.get("term", ""), "")
        return f"Rental plan {item['plan']}: {item['cards']} x {model}, {term}{cancelled}"
    if kind == "beyond":
        return f"{model} used beyond the plans"
    if kind == "tasks":
        return f"{item['class']} jobs"
    if kind == "discount":
        return f"Discount {item['pct']}% on usage"
    if kind == "credit":
        return f"Credit: {item['reason']}"
    return f"{model} usage"


def money(amount: str, lang: str) -> str:
    """``"25500.00"`` -> ``¥25,500.00`` (both languages group thousands with commas)."""
    whole, _, cents = amount.lstrip("-").partition(".")
    sign = "-" if amount.startswith("-") else ""
    return f"{sign}¥{int(whole):,}.{cents}"


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
            "what": describe(line.get("item") or {}, lang),
            "quantity": line["quantity"].rstrip("0").rstrip("."),
            "unit": t.get(line["unit"], line["unit"]),
            "unit_price": line["unit_price"],
            "amount": money(line["amount"], lang),
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
        total=money(inv["total"], lang),
        draft=inv.get("draft", False),
        issued=when.strftime("%Y-%m-%d %H:%M"),
    )
