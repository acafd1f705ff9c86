"""The DAGs the Airflow tests run (Airflow serializes DAGs from files).

``daily``: orders written from a callable, then revenue as a logbook run
joining the customers dimension as of the date, the DAG of the README's
Airflow section. ``clock``: a run whose SQL reads the wall clock.
``wait``: a sensor on orders (or the table the variable ``wait_for`` names;
the date: the logical date, or the variable ``wait_date``). ``tokyo``: orders alone, in a DAG whose
timezone is ahead of UTC.
The warehouse is the Airflow variable ``logbook_warehouse``."""

import datetime as dt

import pendulum
import pyarrow as pa
from airflow.sdk import DAG, CronDataIntervalTimetable, Variable

from pylogbook.airflow import LogbookPartitionSensor, LogbookRunOperator, LogbookWriteOperator

WAREHOUSE = "{{ var.value.logbook_warehouse }}"
START = pendulum.datetime(2026, 3, 1, tz="UTC")

ORDERS = pa.schema([("date", pa.date32()), ("order_id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64())])


def load_orders(logbook_date: dt.date) -> pa.Table:
    """Three orders a day, amounts from the day of the month (times the
    variable ``orders_scale``, 1 unless set)."""
    scale = float(Variable.get("orders_scale", default="1"))
    day = logbook_date
    return pa.table(
        {
            "date": [day] * 3,
            "order_id": [1, 2, 3],
            "customer": ["c-1", "c-2", "c-1"],
            "amount": [scale * day.day, scale * 1.0, scale * 0.5],
        },
        schema=ORDERS,
    )


REVENUE_SQL = """
SELECT o.date, c.region, sum(o.amount) AS revenue
FROM orders o JOIN customers c ON o.customer = c.customer
WHERE o.date = logical_date()
GROUP BY o.date, c.region
"""

# The run at 00:00 on D+1 has logical date D, the day that just ended.
DAILY = CronDataIntervalTimetable("0 0 * * *", timezone="UTC")

with DAG("logbook_daily", schedule=DAILY, start_date=START, catchup=False) as daily:
    orders = LogbookWriteOperator(
        task_id="orders", warehouse=WAREHOUSE, table="orders", python_callable=load_orders, code_version="v1"
    )
    revenue = LogbookRunOperator(
        task_id="revenue", warehouse=WAREHOUSE, table="revenue", sql=REVENUE_SQL, code_version="v1"
    )
    orders >> revenue

with DAG("logbook_clock", schedule="@daily", start_date=START, catchup=False) as clock:
    LogbookRunOperator(
        task_id="revenue",
        warehouse=WAREHOUSE,
        table="revenue",
        sql="SELECT o.date, 'r' AS region, sum(o.amount) AS revenue FROM orders o "
        "WHERE o.date = CAST(now() AS DATE) GROUP BY o.date",
    )

with DAG("logbook_wait", schedule="@daily", start_date=START, catchup=False) as wait:
    LogbookPartitionSensor(
        task_id="upstream_complete",
        warehouse=WAREHOUSE,
        table="{{ var.value.get('wait_for', 'orders') }}",
        date="{{ var.value.get('wait_date', '') }}",
        poke_interval=0.1,
        timeout=1,
        mode="poke",
    )

with DAG("logbook_tokyo", schedule="@daily", start_date=pendulum.datetime(2026, 3, 1, tz="Asia/Tokyo"), catchup=False) as tokyo:
    LogbookWriteOperator(task_id="orders", warehouse=WAREHOUSE, table="orders", python_callable=load_orders)
