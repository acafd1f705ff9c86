"""Runs one DAG run that is already in Airflow's metadata database (a
backfill's, made by ``airflow backfill create``) to the end, in this
process, the way ``dag.test()`` runs the run it makes: the tests' stand-in
for Airflow's scheduler and executor, which they do not start. Several of
these at once are a backfill run in parallel.

Usage: python run_dag_run.py DAG_FILE DAG_ID RUN_ID"""

import importlib.util
import sys
import time


def load_dag(path: str, dag_id: str):
    from airflow.sdk import DAG

    spec = importlib.util.spec_from_file_location("dags_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = [v for v in vars(module).values() if isinstance(v, DAG) and v.dag_id == dag_id]
    if not found:
        sys.exit(f"{path}: no DAG {dag_id}")
    return found[0]


def run(dag, run_id: str) -> str:
    from airflow import settings
    from airflow.models.dagrun import DagRun
    from airflow.sdk.definitions.dag import _run_task
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.state import DagRunState, TaskInstanceState
    from sqlalchemy import select

    session = settings.Session()
    dr = session.scalar(select(DagRun).where(DagRun.dag_id == dag.dag_id, DagRun.run_id == run_id))
    if dr is None:
        sys.exit(f"DAG {dag.dag_id}: no run {run_id}")
    dr.dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    dr.state = DagRunState.RUNNING
    session.commit()
    while dr.state == DagRunState.RUNNING:
        session.expire_all()
        schedulable, _ = dr.update_state(session=session)
        for ti in schedulable:
            ti.try_number += 1
            ti.state = TaskInstanceState.SCHEDULED
        session.commit()
        scheduled = [ti for ti in dr.get_task_instances(session=session) if ti.state == TaskInstanceState.SCHEDULED]
        if not scheduled:
            time.sleep(0.2)
        for ti in scheduled:
            _run_task(ti=ti, task=dag.task_dict[ti.task_id])
    return str(dr.state)


if __name__ == "__main__":
    path, dag_id, run_id = sys.argv[1:4]
    state = run(load_dag(path, dag_id), run_id)
    print(state)
    sys.exit(0 if state == "success" else 1)
