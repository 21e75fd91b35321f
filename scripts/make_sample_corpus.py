"""Generate the binary files of the Acme Instruments sample corpus (PDFs and a DOCX).

The text sources of the corpus (Markdown, HTML, plain text, CSV, JSON) are committed as they are;
this script writes only the files that need a library to produce:

- reports/annual-report-2025.pdf     (4 pages, numbered section headings, metadata title)
- reports/incident-report-2025-07.pdf (2 pages, with a bookmark outline)
- reports/board-letter.pdf            (1 page)
- handbook/employee-handbook.docx     (Title and Heading styles, one table)

Output is deterministic: creation dates are fixed and the DOCX zip entries carry a fixed time
stamp, so regenerating the corpus does not change the committed files.

Usage: python scripts/make_sample_corpus.py examples/acme-corpus
"""

from __future__ import annotations

import io
import sys
import zipfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from docx import Document
from fpdf import FPDF
from fpdf.enums import XPos, YPos

ANNUAL_DATE = datetime(2026, 2, 27, 9, 0, 0, tzinfo=UTC)
INCIDENT_DATE = datetime(2025, 8, 4, 14, 30, 0, tzinfo=UTC)
LETTER_DATE = datetime(2026, 2, 20, 16, 0, 0, tzinfo=UTC)
HANDBOOK_DATE = datetime(2026, 1, 5, 8, 0, 0, tzinfo=UTC)
ZIP_TIMESTAMP = (2026, 1, 5, 8, 0, 0)

COMPANY = "Acme Instruments"


class AcmePDF(FPDF):
    """An A4 document in Helvetica with a running head, page numbers and simple block helpers."""

    def __init__(self, title: str, running_head: str, created: datetime) -> None:
        super().__init__(orientation="P", unit="mm", format="A4")
        self.running_head = running_head
        self.set_margins(20, 20, 20)
        self.set_auto_page_break(auto=True, margin=20)
        self.set_title(title)
        self.set_author(COMPANY)
        self.set_creator("scripts/make_sample_corpus.py")
        self.set_lang("en-US")
        self.set_creation_date(created)

    def header(self) -> None:
        self.set_font("Helvetica", "I", 8)
        self.set_text_color(110, 110, 110)
        self.cell(0, 6, self.running_head, align="R", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.set_text_color(0, 0, 0)
        self.ln(4)

    def footer(self) -> None:
        self.set_y(-15)
        self.set_font("Helvetica", "", 8)
        self.set_text_color(110, 110, 110)
        self.cell(0, 8, f"Page {self.page_no()} of {{nb}}", align="C")
        self.set_text_color(0, 0, 0)

    def title_block(self, title: str, subtitle: str) -> None:
        self.set_font("Helvetica", "B", 20)
        self.multi_cell(0, 10, _ascii(title), align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.set_font("Helvetica", "", 11)
        self.set_text_color(80, 80, 80)
        self.multi_cell(0, 6, _ascii(subtitle), align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.set_text_color(0, 0, 0)
        self.ln(6)

    def heading(self, text: str, level: int = 1, bookmark: bool = False) -> None:
        """A heading on its own line; with `bookmark`, also an outline entry at `level`."""
        if bookmark:
            self.start_section(_ascii(text), level=level - 1)
        size = {1: 14, 2: 12}.get(level, 11)
        self.ln(2 if level > 1 else 3)
        self.set_font("Helvetica", "B", size)
        self.cell(0, 8, _ascii(text), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.ln(1)

    def para(self, text: str) -> None:
        self.set_font("Helvetica", "", 11)
        self.multi_cell(0, 5.8, _ascii(text), align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.ln(2.5)

    def bullets(self, items: Sequence[str]) -> None:
        self.set_font("Helvetica", "", 11)
        for item in items:
            self.set_x(self.l_margin + 4)
            self.multi_cell(0, 5.8, "- " + _ascii(item), align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.ln(2.5)

    def data_table(self, rows: Sequence[Sequence[str]], widths: Sequence[int]) -> None:
        """A table whose first row is the header."""
        self.set_font("Helvetica", "", 10)
        with self.table(col_widths=tuple(widths), text_align="LEFT", line_height=6) as table:
            for row in rows:
                cells = table.row()
                for value in row:
                    cells.cell(_ascii(value))
        self.ln(4)


def _ascii(text: str) -> str:
    """The core fonts only encode Latin-1; the corpus keeps PDF text to plain ASCII."""
    if not text.isascii():
        raise ValueError(f"non-ASCII text in a PDF: {text!r}")
    return text


def build_annual_report(path: Path) -> None:
    pdf = AcmePDF("Acme Instruments Annual Report 2025", "Acme Instruments - Annual Report 2025", ANNUAL_DATE)
    pdf.set_subject("Results and outlook of Acme Instruments for the financial year 2025")
    pdf.set_keywords("annual report, revenue, headcount, outlook, Acme Instruments")

    pdf.add_page()
    pdf.title_block(
        "Acme Instruments Annual Report 2025",
        "Financial year ended December 31, 2025. Published February 27, 2026.",
    )
    pdf.heading("Letter from the Chief Executive Officer")
    pdf.para(
        "Dear shareholders, customers and colleagues, 2025 was the strongest year in the history of "
        "Acme Instruments. Revenue grew to $48.2 million, up 12% from $43.0 million in 2024, and every "
        "product segment contributed to that growth. We shipped more than 14,600 sensors to about 1,900 "
        "laboratory customers in 38 countries."
    )
    pdf.para(
        "It was also a year that tested us. In July a configuration defect in AX-220 firmware caused an "
        "outage of our telemetry service for 37 customer sites. Our teams identified the cause within "
        "hours, restored service the same day and released firmware FW-3.2.1 eight days later. The "
        "lessons we learned have made our release process safer, and they are described in section 1.2 "
        "of this report and in the incident report for July 2025."
    )
    pdf.para(
        "We ended the year with 212 employees, a new calibration laboratory in Boston and a product "
        "pipeline that includes the TX-9 Temperature Probe, which launches in April 2026. I want to thank "
        "every employee for their work, and our customers for their trust."
    )
    pdf.para("Dana Whitfield, Chief Executive Officer")

    pdf.add_page()
    pdf.heading("1. Overview")
    pdf.para(
        "Acme Instruments designs, manufactures and calibrates sensors for research laboratories, "
        "pharmaceutical production and pilot plants. Our products measure pressure, temperature, flow and "
        "humidity, and connect to the Acme telemetry service through the GW-10 gateway. The company was "
        "founded in 2009 and is headquartered in Boston, Massachusetts, with a second production site in "
        "Eindhoven, the Netherlands."
    )
    pdf.heading("1.1 Products", level=2)
    pdf.para(
        "The AX-220 Pressure Sensor remained our best-selling product, with more than 6,000 units shipped. "
        "The BX-5 Flow Meter gained a second hardware and firmware release, BX-5-R2, in November, which "
        "improved accuracy at low flow rates. Development of the TX-9 Temperature Probe was completed in "
        "December, and the product will be launched on April 15, 2026."
    )
    pdf.heading("1.2 Operations and Quality", level=2)
    pdf.para(
        "Output rose by 15% while the first-pass yield at final calibration improved from 96.1% to 97.2%. "
        "We opened a second accredited calibration laboratory in Boston, which doubled our capacity to "
        "issue calibration certificates."
    )
    pdf.para(
        "On July 14, 2025, a scheduled configuration refresh caused 1,340 AX-220 units to report error "
        "ERR-4012 and stop sending data to the telemetry service. Service was restored after 6 hours and "
        "38 minutes. Firmware FW-3.2.1, released on July 22, 2025, removed the defect, and configuration "
        "changes are now rolled out in stages. No customer equipment was damaged."
    )
    pdf.heading("1.3 People", level=2)
    pdf.para(
        "Headcount grew from 188 to 212 employees during the year. We hired mainly in engineering and "
        "calibration. We also prepared an updated Remote Work Policy, effective March 1, 2026, which keeps "
        "the rule that employees may work remotely up to three days per week with manager approval."
    )
    pdf.data_table(
        [
            ("Function", "Employees at Dec 31, 2025", "Employees at Dec 31, 2024"),
            ("Production and calibration", "78", "71"),
            ("Engineering", "56", "47"),
            ("Sales and customer support", "44", "40"),
            ("General and administrative", "34", "30"),
            ("Total", "212", "188"),
        ],
        (70, 50, 50),
    )

    pdf.add_page()
    pdf.heading("2. Financial Highlights")
    pdf.para(
        "Revenue for 2025 was $48.2 million, an increase of 12% from $43.0 million in 2024. Gross margin "
        "improved to 58.3% from 57.2%, helped by higher calibration capacity and lower costs for ceramic "
        "pressure elements. Operating income was $6.9 million, compared with $5.4 million in 2024."
    )
    pdf.data_table(
        [
            ("Key figure (USD million)", "2025", "2024", "Change"),
            ("Revenue", "48.2", "43.0", "+12%"),
            ("Gross profit", "28.1", "24.6", "+14%"),
            ("Research and development", "7.7", "6.8", "+13%"),
            ("Operating income", "6.9", "5.4", "+28%"),
            ("Net income", "5.1", "4.0", "+28%"),
        ],
        (70, 30, 30, 40),
    )
    pdf.heading("2.1 Revenue by Segment", level=2)
    pdf.para(
        "Pressure sensing remains our largest segment. Flow grew fastest, driven by the BX-5 Flow Meter "
        "and its BX-5-R2 release. Services and calibration benefited from the new Boston laboratory."
    )
    pdf.data_table(
        [
            ("Segment", "2025 (USD million)", "2024 (USD million)", "Share of 2025"),
            ("Pressure", "21.5", "19.6", "45%"),
            ("Temperature", "14.1", "12.9", "29%"),
            ("Flow", "8.3", "6.9", "17%"),
            ("Services and calibration", "4.3", "3.6", "9%"),
            ("Total", "48.2", "43.0", "100%"),
        ],
        (55, 38, 38, 39),
    )
    pdf.heading("2.2 Profitability", level=2)
    pdf.para(
        "Operating margin rose to 14.3% from 12.6%. Research and development spending was $7.7 million, or "
        "16% of revenue, in line with our target of investing at least 15% of revenue in new products. "
        "Selling, general and administrative expenses grew more slowly than revenue."
    )
    pdf.heading("2.3 Cash and Investment", level=2)
    pdf.para(
        "Cash and cash equivalents were $12.6 million at year end, up from $9.8 million. Capital "
        "expenditure of $2.9 million was spent mainly on the Boston calibration laboratory and on test "
        "equipment for the TX-9 production line. The company has no debt."
    )

    pdf.add_page()
    pdf.heading("3. Outlook")
    pdf.para(
        "For 2026 we expect revenue between $52 million and $54 million, with growth in every segment. The "
        "TX-9 Temperature Probe launches on April 15, 2026 at a list price of $689.00, and the BX-5-R3 "
        "release is planned for the second quarter."
    )
    pdf.heading("3.1 Product Plans", level=2)
    pdf.bullets(
        [
            "TX-9 Temperature Probe: launch on April 15, 2026, with calibration certificates from the "
            "accredited Acme laboratory.",
            "AX-220: specification revision D widens the operating temperature range to -20 to 85 C for "
            "part number AX-220-B.",
            "BX-5-R3: faster pulse output and a second analog output, planned for the second quarter.",
            "GW-10 gateway: support for up to 32 sensors on one bus and staged configuration rollouts.",
        ]
    )
    pdf.heading("3.2 Financial Targets", level=2)
    pdf.para(
        "We aim for a gross margin of at least 58% and an operating margin above 14%. Research and "
        "development spending will stay at about 16% of revenue. We plan to hire around 20 people in "
        "2026, mainly in engineering and customer support."
    )
    pdf.heading("3.3 Risks", level=2)
    pdf.para(
        "The main risks to this outlook are supply of platinum sensing elements for the TX-9, whose lead "
        "time is ten weeks, exchange rates for our European sales, and the pace of laboratory investment "
        "by pharmaceutical customers."
    )
    pdf.output(str(path))


def build_incident_report(path: Path) -> None:
    title = "Incident Report INC-2025-031: AX-220 Configuration Outage"
    pdf = AcmePDF(title, "Acme Instruments - Incident Report INC-2025-031 - Internal", INCIDENT_DATE)
    pdf.set_subject("Post-incident review of the ERR-4012 outage on AX-220 sensors, July 14, 2025")
    pdf.set_keywords("incident, ERR-4012, AX-220, FW-3.2.1, root cause")

    pdf.add_page()
    pdf.title_block(
        title,
        "Incident date: July 14, 2025. Severity: 1. Status: closed. "
        "Report author: Marcus Oyelaran, VP Engineering. Report date: August 4, 2025.",
    )
    pdf.heading("1. Summary", bookmark=True)
    pdf.para(
        "On July 14, 2025, a scheduled configuration refresh sent from the Acme telemetry service caused "
        "1,340 AX-220 pressure sensors at 37 customer sites to reject their configuration file and report "
        "error ERR-4012 (Configuration file could not be parsed). The affected sensors switched to their "
        "safe state, drove their analog output to the 3.6 mA fault current and stopped sending data to "
        "the telemetry service. Service was restored after 6 hours and 38 minutes."
    )
    pdf.heading("2. Impact", bookmark=True)
    pdf.bullets(
        [
            "1,340 AX-220 units running firmware FW-3.2.0 or older, at 37 customer sites, were affected.",
            "Telemetry data from the affected units is missing for up to 6 hours and 38 minutes.",
            "Customers' control systems received the fault current and raised alarms; no process damage "
            "and no damage to sensors was reported.",
            "Support received 96 calls and 141 tickets during the incident.",
        ]
    )
    pdf.heading("3. Timeline", bookmark=True)
    pdf.para("All times are UTC on July 14, 2025, unless stated otherwise.")
    pdf.data_table(
        [
            ("Time", "Event"),
            ("06:00", "Scheduled configuration refresh starts for all AX-220 units connected via GW-10."),
            ("06:12", "First ERR-4012 alarms appear in the telemetry service."),
            ("06:40", "Support receives the first customer calls; a severity 1 incident is declared."),
            ("08:15", "The configuration refresh is halted by the operations team."),
            ("09:30", "The firmware team identifies the byte order mark as the cause."),
            ("12:50", "Previous configurations are restored through the gateways; telemetry recovers."),
            ("July 18", "Acme Configurator 4.2 is released; it no longer writes a byte order mark."),
            ("July 22", "Firmware FW-3.2.1 is released; it accepts files with a byte order mark."),
        ],
        (25, 145),
    )

    pdf.add_page()
    pdf.heading("4. Root Cause", bookmark=True)
    pdf.heading("4.1 Trigger", level=2, bookmark=True)
    pdf.para(
        "Acme Configurator 4.1, released on July 10, 2025, changed the library it uses to write the "
        "sensor.cfg file. The new library writes a UTF-8 byte order mark at the start of the file. The "
        "telemetry service used the same library to build the configuration files for the scheduled "
        "refresh on July 14."
    )
    pdf.heading("4.2 Underlying Defect", level=2, bookmark=True)
    pdf.para(
        "The configuration parser in firmware FW-3.2.0 and older treated the byte order mark as invalid "
        "characters and rejected the whole file with ERR-4012, instead of ignoring the mark. The firmware "
        "test suite had no test case for files with a byte order mark, and the refresh was sent to every "
        "connected unit at once, so the defect reached all customers before it was noticed."
    )
    pdf.heading("5. Resolution", bookmark=True)
    pdf.para(
        "The operations team halted the refresh at 08:15 and restored each unit's previous configuration "
        "through the GW-10 gateways, which completed at 12:50. Firmware FW-3.2.1 was released on July 22, "
        "2025 and rolled out to the installed base over the following months."
    )
    pdf.heading("6. Corrective Actions", bookmark=True)
    pdf.data_table(
        [
            ("ID", "Action", "Owner", "Status"),
            ("CA-1", "FW-3.2.1 accepts a byte order mark", "Hannah Brandt", "Done"),
            ("CA-2", "Configurator 4.2 writes no byte order mark", "Hannah Brandt", "Done"),
            ("CA-3", "Staged rollouts, starting with 10% of units", "Samuel Okafor", "Done"),
            ("CA-4", "Byte order mark cases in firmware tests", "Leo Castellano", "Done"),
            ("CA-5", "Update ERR-4012 in the AX-220 specification", "Priya Raman", "Done"),
        ],
        (16, 94, 38, 22),
    )
    pdf.output(str(path))


def build_board_letter(path: Path) -> None:
    pdf = AcmePDF("Letter to the Board of Directors - February 2026", "Acme Instruments - Board", LETTER_DATE)
    pdf.set_subject("Chief Executive Officer's letter to the Board ahead of the annual report")

    pdf.add_page()
    pdf.title_block("Letter to the Board of Directors", "Boston, February 20, 2026")
    pdf.para("Dear members of the Board,")
    pdf.para(
        "Ahead of our meeting on March 2, I am sending the draft of the Acme Instruments Annual Report "
        "2025. The headline figures are final: revenue of $48.2 million, up 12% from $43.0 million in "
        "2024; operating income of $6.9 million; and cash of $12.6 million at year end with no debt. We "
        "ended the year with 212 employees."
    )
    pdf.para(
        "The July outage on AX-220 sensors remains the most important lesson of the year. All five "
        "corrective actions from incident INC-2025-031 are complete, and the last customers still on old "
        "firmware are being upgraded to FW-3.2.1."
    )
    pdf.para(
        "I ask the Board to approve three items at the March meeting: the annual report for publication, "
        "a revenue target of $52 million to $54 million for 2026, and a capital budget of $3.4 million, "
        "most of it for TX-9 production equipment ahead of the launch on April 15, 2026."
    )
    pdf.para("With kind regards,")
    pdf.para("Dana Whitfield, Chief Executive Officer")
    pdf.output(str(path))


def build_handbook(path: Path) -> None:
    document = Document()
    props = document.core_properties
    props.title = "Employee Handbook"
    props.author = "Olivia Grant"
    props.last_modified_by = "Olivia Grant"
    props.subject = "Acme Instruments employee handbook"
    props.keywords = "handbook, working hours, leave, probation"
    props.created = HANDBOOK_DATE.replace(tzinfo=None)
    props.modified = HANDBOOK_DATE.replace(tzinfo=None)
    props.last_printed = HANDBOOK_DATE.replace(tzinfo=None)
    props.revision = 1

    document.add_paragraph("Employee Handbook", style="Title")
    document.add_paragraph("Acme Instruments, edition 2026. Owner: Olivia Grant, HR Director.")

    document.add_heading("Welcome", level=1)
    document.add_paragraph(
        "Welcome to Acme Instruments. We design, build and calibrate sensors that laboratories around the "
        "world rely on for accurate measurements. This handbook explains how we work together: our "
        "working hours, leave, and the policies every employee should know. It does not replace your "
        "employment contract; where the two differ, the contract applies."
    )
    document.add_paragraph(
        "Our policies are published on the intranet. The ones you will use most often are the Remote Work "
        "Policy, the Expense Policy, the Travel Policy and the Information Security Policy."
    )

    document.add_heading("Working Hours", level=1)
    document.add_heading("Standard Hours", level=2)
    document.add_paragraph(
        "A Full-Time Employee works 40 hours per week, Monday to Friday. Core hours are 10:00 to 15:00 "
        "local time; outside the core hours you may start between 07:00 and 10:00 and finish between "
        "15:00 and 19:00, in agreement with your Line Manager."
    )
    document.add_heading("Shift Work", level=2)
    document.add_paragraph(
        "Production and calibration teams work in two shifts, 06:00 to 14:00 and 14:00 to 22:00. Shift "
        "schedules are published four weeks in advance. Hours worked after 22:00 are paid at 125%."
    )
    document.add_heading("Remote Work", level=2)
    document.add_paragraph(
        "Employees may work remotely up to three days per week with manager approval, once the Probation "
        "Period has ended. The details are in the Remote Work Policy."
    )

    document.add_heading("Leave", level=1)
    document.add_paragraph(
        "The leave year runs from 1 January to 31 December. Part-time employees receive leave in "
        "proportion to their contracted hours. The table below shows the leave entitlement of a Full-Time "
        "Employee."
    )
    table = document.add_table(rows=1, cols=2)
    table.style = "Table Grid"
    header = table.rows[0].cells
    header[0].text = "Leave Type"
    header[1].text = "Days Per Year"
    for leave_type, days in [
        ("Annual Leave", "25"),
        ("Sick Leave", "10"),
        ("Parental Leave", "70"),
        ("Bereavement Leave", "5"),
        ("Volunteer Leave", "2"),
    ]:
        cells = table.add_row().cells
        cells[0].text = leave_type
        cells[1].text = days
    document.add_heading("Requesting Leave", level=2)
    document.add_paragraph(
        "Request annual leave in the HR portal at least two weeks in advance for absences of more than "
        "three days. Up to five days of unused annual leave may be carried over to the next leave year."
    )
    document.add_heading("Sick Leave", level=2)
    document.add_paragraph(
        "Tell your Line Manager before 09:00 on the first day of sickness. A medical certificate is needed "
        "for absences longer than three consecutive working days."
    )

    document.add_heading("Definitions", level=1)
    document.add_paragraph("Probation Period: the first 90 days of employment.")
    document.add_paragraph("Full-Time Employee: an employee contracted to work 40 hours per week.")
    document.add_paragraph("Leave Year: the calendar year, from 1 January to 31 December.")

    buffer = io.BytesIO()
    document.save(buffer)
    path.write_bytes(_fixed_zip(buffer.getvalue()))


def _fixed_zip(data: bytes) -> bytes:
    """The same zip with every entry time-stamped ZIP_TIMESTAMP, so the bytes are reproducible."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            info = zipfile.ZipInfo(item.filename, date_time=ZIP_TIMESTAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            target.writestr(info, source.read(item.filename))
    return out.getvalue()


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} CORPUS_DIR", file=sys.stderr)
        return 2
    corpus = Path(argv[1])
    reports = corpus / "reports"
    handbook = corpus / "handbook"
    reports.mkdir(parents=True, exist_ok=True)
    handbook.mkdir(parents=True, exist_ok=True)
    outputs = [
        (build_annual_report, reports / "annual-report-2025.pdf"),
        (build_incident_report, reports / "incident-report-2025-07.pdf"),
        (build_board_letter, reports / "board-letter.pdf"),
        (build_handbook, handbook / "employee-handbook.docx"),
    ]
    for build, path in outputs:
        build(path)
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
