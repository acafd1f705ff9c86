//! The Flight SQL service: each protocol call mapped onto planning
//! ([`crate::query`]), plans kept for their fetch ([`crate::planned`]),
//! settings ([`crate::sessions`]), prepared statements
//! ([`crate::prepared`]), browsing ([`crate::metadata`]) and streaming
//! ([`crate::results`]).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::sql::metadata::SqlInfoData;
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, Any, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandPreparedStatementQuery,
    CommandPreparedStatementUpdate, CommandStatementIngest, CommandStatementQuery,
    CommandStatementSubstraitPlan, CommandStatementUpdate, DoPutPreparedStatementResult,
    ProstMessageExt, SqlInfo, TicketStatementQuery,
};
use arrow_flight::{
    FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, IpcMessage,
    SchemaAsIpc, Ticket,
};
use arrow_schema::Schema;
use datafusion::common::ScalarValue;
use datafusion::dataframe::DataFrame;
use futures::{stream, Stream, TryStreamExt};
use logbook_core::Warehouse;
use logbook_datafusion::datafusion;
use prost::Message;
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status, Streaming};

use crate::metadata;
use crate::planned::{PlannedStatements, PLAN_TTL};
use crate::prepared::PreparedStatements;
use crate::query::{
    cluster_status, datafusion_status, number_placeholders, parameter_schema, plan, plan_at,
    Planned, TicketBody,
};
use crate::results::{flight_stream, QueryLog};
use crate::sessions::Sessions;
use crate::settings::{parse_set, SetStatement, Settings};
use crate::ServerOptions;
use logbook_datafusion::plain::plain_schema;

type DoGetStream = Pin<Box<dyn Stream<Item = Result<arrow_flight::FlightData, Status>> + Send>>;

/// The Flight SQL service over one warehouse (cheap to clone).
#[derive(Clone)]
pub struct LogbookFlightSql(Arc<Shared>);

struct Shared {
    warehouse: Warehouse,
    sessions: Sessions,
    prepared: PreparedStatements,
    planned: PlannedStatements,
    slots: Arc<Semaphore>,
    max_concurrent_queries: usize,
    max_result_rows: u64,
    /// Where queries run, when not here.
    cluster: Option<logbook_cluster::Cluster>,
    sql_info: SqlInfoData,
}

impl std::fmt::Debug for LogbookFlightSql {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogbookFlightSql")
            .field("warehouse", &self.0.warehouse.location().uri())
            .field("max_concurrent_queries", &self.0.max_concurrent_queries)
            .field("max_result_rows", &self.0.max_result_rows)
            .finish()
    }
}

impl LogbookFlightSql {
    /// A service answering for `warehouse`.
    pub fn new(warehouse: Warehouse, options: &ServerOptions) -> Self {
        Self(Arc::new(Shared {
            warehouse,
            sessions: Sessions::new(options.ids.clone(), options.max_sessions),
            prepared: PreparedStatements::new(options.ids.clone(), options.max_prepared_statements),
            planned: PlannedStatements::new(options.ids.clone(), options.max_kept_plans, PLAN_TTL),
            slots: Arc::new(Semaphore::new(options.max_concurrent_queries)),
            max_concurrent_queries: options.max_concurrent_queries,
            max_result_rows: options.max_result_rows,
            cluster: options.cluster.clone(),
            sql_info: metadata::sql_info(),
        }))
    }

    /// Stream one statement, within the server's limits: the plan its
    /// `GetFlightInfo` kept, or one made now.
    async fn execute<T>(
        &self,
        sql: &str,
        fetch: Fetch<'_>,
        request: &Request<T>,
    ) -> Result<Response<DoGetStream>, Status> {
        let log = QueryLog {
            client: request
                .remote_addr()
                .map_or_else(|| "unknown".to_string(), |a| a.to_string()),
            sql: sql.to_string(),
            started: std::time::Instant::now(),
        };
        let permit = self.0.slots.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "{} queries are running, this server's limit: retry shortly (or start the server with a larger --max-concurrent-queries)",
                self.0.max_concurrent_queries
            ))
        })?;
        let planned = match fetch {
            Fetch::Ticket(body) => self.ticket_plan(body).await,
            Fetch::Heads { settings, params } => {
                plan_at(&self.0.warehouse, sql, settings, params, &BTreeMap::new())
                    .await
                    .map(|p| (p.df, None))
            }
        };
        let (df, kept) = planned.inspect_err(|e| {
            tracing::info!(client = %log.client, sql = %log.sql, error = %e.message(), "query refused");
        })?;
        let schema = df.schema().as_arrow().clone();
        let stream = match &self.0.cluster {
            Some(cluster) => cluster.execute(df).await.map_err(cluster_status)?,
            None => df.execute_stream().await.map_err(datafusion_status)?,
        };
        // Streaming: a retry from here on plans again.
        if let Some(id) = kept {
            self.0.planned.forget(id);
        }
        Ok(Response::new(flight_stream(
            stream,
            &schema,
            self.0.max_result_rows,
            permit,
            log,
        )))
    }

    /// A ticket's plan: the one its `GetFlightInfo` kept (with its id), or
    /// the statement planned again at the versions and with the parameters
    /// it was described with, or a refusal.
    async fn ticket_plan<'a>(
        &self,
        body: &'a TicketBody,
    ) -> Result<(DataFrame, Option<&'a str>), Status> {
        // A prepared statement closed since: refused, kept plan or not.
        let prepared = match &body.prepared {
            Some((handle, digest)) => Some((self.0.prepared.get(handle)?, *digest)),
            None => None,
        };
        if let Some(id) = body.plan.as_deref() {
            if let Some(df) = self.0.planned.get(id, &body.statement()) {
                return Ok((df, Some(id)));
            }
        }
        let params = match prepared {
            Some((p, digest)) if p.params_digest() != digest => {
                return Err(Status::failed_precondition(
                    "the prepared statement was bound to other parameters after this ticket was issued; call GetFlightInfo again",
                ))
            }
            Some((p, _)) => p.params,
            None => None,
        };
        let versions = &body.versions;
        plan_at(&self.0.warehouse, &body.sql, &body.settings, params.as_deref(), versions)
            .await
            .map(|p| (p.df, None))
            .map_err(|e| match e.code() {
                // A version the ticket pins expired, or its table went.
                tonic::Code::NotFound if !versions.is_empty() => Status::failed_precondition(format!(
                    "this ticket's tables have moved on since it was issued; call GetFlightInfo again ({})",
                    e.message()
                )),
                _ => e,
            })
    }

    /// The `FlightInfo` of a statement planned now: its plan kept for the
    /// fetch, and a ticket with what to plan again if the plan is gone.
    fn describe(
        &self,
        planned: Planned,
        sql: String,
        settings: Settings,
        prepared: Option<(String, u64)>,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = plain_schema(planned.df.schema().as_arrow());
        let mut body = TicketBody {
            sql,
            settings,
            prepared,
            versions: planned.versions,
            plan: None,
        };
        body.plan = self.0.planned.keep(planned.df, body.statement());
        let ticket = TicketStatementQuery {
            statement_handle: body.encode().into(),
        };
        flight_info(&schema, ticket.as_any().encode_to_vec(), descriptor)
    }
}

/// Where a fetch's plan comes from.
enum Fetch<'a> {
    /// A ticket `GetFlightInfo` issued: the plan it kept (taken once the
    /// fetch holds a slot) or, gone, the same statement planned again.
    Ticket(&'a TicketBody),
    /// A prepared statement fetched by its handle (no `GetFlightInfo`
    /// came first): planned now, at the tables' heads.
    Heads {
        settings: &'a Settings,
        params: Option<&'a [ScalarValue]>,
    },
}

impl LogbookFlightSql {
    /// Run a `SET`: change the caller's session and send its cookie back
    /// with an empty result (no endpoints, nothing to fetch).
    fn apply_set(
        &self,
        set: Result<SetStatement, String>,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let set = set.map_err(Status::invalid_argument)?;
        let cookie = self.0.sessions.apply(request.metadata(), &set);
        let info = FlightInfo::new()
            .try_with_schema(&Schema::empty())
            .map_err(|e| Status::internal(e.to_string()))?
            .with_descriptor(request.into_inner());
        let mut response = Response::new(info);
        response.metadata_mut().insert("set-cookie", cookie);
        Ok(response)
    }
}

/// A `FlightInfo` with one endpoint on this server.
fn flight_info(
    schema: &Schema,
    ticket: Vec<u8>,
    descriptor: FlightDescriptor,
) -> Result<Response<FlightInfo>, Status> {
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| Status::internal(format!("cannot encode the result schema: {e}")))?
        .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(ticket)))
        .with_descriptor(descriptor);
    Ok(Response::new(info))
}

fn batch_stream(batch: RecordBatch) -> Response<DoGetStream> {
    let schema = batch.schema();
    let encoded = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(stream::once(async { Ok(batch) }))
        .map_err(Status::from);
    Response::new(Box::pin(encoded))
}

fn schema_bytes(schema: &Schema) -> Result<bytes::Bytes, Status> {
    let IpcMessage(bytes) = SchemaAsIpc::new(schema, &Default::default())
        .try_into()
        .map_err(|e: arrow_schema::ArrowError| {
            Status::internal(format!("cannot encode a schema: {e}"))
        })?;
    Ok(bytes)
}

fn handle_str(handle: &[u8]) -> Result<&str, Status> {
    std::str::from_utf8(handle)
        .map_err(|_| Status::invalid_argument("not a prepared statement handle of this server"))
}

fn read_only(what: &str) -> Status {
    Status::permission_denied(format!(
        "this server is read-only: {what} is refused (write partitions with `logbook write`/`logbook run` or the Rust API)"
    ))
}

#[tonic::async_trait]
impl FlightSqlService for LogbookFlightSql {
    type FlightService = LogbookFlightSql;

    /// Authentication is the bearer token on every call (checked before this
    /// runs), so the handshake has nothing to exchange.
    async fn do_handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        let reply = HandshakeResponse {
            protocol_version: 0,
            payload: Default::default(),
        };
        Ok(Response::new(Box::pin(stream::once(async { Ok(reply) }))))
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        if let Some(set) = parse_set(&query.query) {
            return self.apply_set(set, request);
        }
        let settings = self.0.sessions.resolve(request.metadata())?;
        let sql = number_placeholders(&query.query);
        let planned = plan_at(&self.0.warehouse, &sql, &settings, None, &BTreeMap::new()).await?;
        self.describe(planned, sql, settings, None, request.into_inner())
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let body = TicketBody::decode(&ticket.statement_handle)?;
        self.execute(&body.sql, Fetch::Ticket(&body), &request)
            .await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<arrow_flight::Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        // Clients prepare every statement (ADBC's DB-API does), `SET` too:
        // it is checked now and applied when executed.
        if let Some(set) = parse_set(&query.query) {
            set.map_err(Status::invalid_argument)?;
            let handle = self.0.prepared.create(query.query)?;
            return Ok(ActionCreatePreparedStatementResult {
                prepared_statement_handle: handle.into_bytes().into(),
                dataset_schema: schema_bytes(&Schema::empty())?,
                parameter_schema: schema_bytes(&Schema::empty())?,
            });
        }
        let settings = self.0.sessions.resolve(request.metadata())?;
        let sql = number_placeholders(&query.query);
        let df = plan(&self.0.warehouse, &sql, &settings, None).await?;
        let dataset = plain_schema(df.schema().as_arrow());
        let params = parameter_schema(&df)?;
        let handle = self.0.prepared.create(sql)?;
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into_bytes().into(),
            dataset_schema: schema_bytes(&dataset)?,
            parameter_schema: schema_bytes(&params)?,
        })
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let handle = handle_str(&query.prepared_statement_handle)?.to_string();
        let batches: Vec<RecordBatch> = FlightRecordBatchStream::new_from_flight_data(
            request.into_inner().map_err(FlightError::from),
        )
        .try_collect()
        .await
        .map_err(|e| Status::invalid_argument(format!("cannot read the parameters: {e}")))?;
        self.0.prepared.bind(&handle, &batches)?;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle.into_bytes().into()),
        })
    }

    async fn get_flight_info_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let handle = handle_str(&cmd.prepared_statement_handle)?.to_string();
        let prepared = self.0.prepared.get(&handle)?;
        if let Some(set) = parse_set(&prepared.sql) {
            return self.apply_set(set, request);
        }
        let settings = self.0.sessions.resolve(request.metadata())?;
        let digest = prepared.params_digest();
        let planned = plan_at(
            &self.0.warehouse,
            &prepared.sql,
            &settings,
            prepared.params.as_deref(),
            &BTreeMap::new(),
        )
        .await?;
        self.describe(
            planned,
            prepared.sql,
            settings,
            Some((handle, digest)),
            request.into_inner(),
        )
    }

    async fn do_get_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let prepared = self
            .0
            .prepared
            .get(handle_str(&cmd.prepared_statement_handle)?)?;
        let settings = self.0.sessions.resolve(request.metadata())?;
        let fetch = Fetch::Heads {
            settings: &settings,
            params: prepared.params.as_deref(),
        };
        self.execute(&prepared.sql, fetch, &request).await
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        _request: Request<arrow_flight::Action>,
    ) -> Result<(), Status> {
        self.0
            .prepared
            .close(handle_str(&query.prepared_statement_handle)?)
    }

    async fn do_put_statement_update(
        &self,
        cmd: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        match parse_set(&cmd.query) {
            // An update call cannot return the session cookie: only a
            // session the client already holds can be changed this way.
            Some(set) => {
                let set = set.map_err(Status::invalid_argument)?;
                self.0.sessions.apply_existing(request.metadata(), &set)?;
                Ok(0)
            }
            None => Err(read_only("an update statement")),
        }
    }

    async fn do_put_prepared_statement_update(
        &self,
        _query: CommandPreparedStatementUpdate,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        Err(read_only("a prepared update"))
    }

    async fn do_put_statement_ingest(
        &self,
        cmd: CommandStatementIngest,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        Err(read_only(&format!("bulk ingestion into {:?}", cmd.table)))
    }

    async fn do_put_substrait_plan(
        &self,
        _query: CommandStatementSubstraitPlan,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        Err(Status::unimplemented(
            "Substrait plans are not supported: send SQL",
        ))
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let ticket = query.as_any().encode_to_vec();
        let schema = query.into_builder().schema();
        flight_info(&schema, ticket, request.into_inner())
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(batch_stream(metadata::catalogs(query)?))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let ticket = query.as_any().encode_to_vec();
        let schema = query.into_builder().schema();
        flight_info(&schema, ticket, request.into_inner())
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(batch_stream(
            metadata::schemas(&self.0.warehouse, query).await?,
        ))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let ticket = query.as_any().encode_to_vec();
        let schema = query.into_builder().schema();
        flight_info(&schema, ticket, request.into_inner())
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(batch_stream(
            metadata::tables(&self.0.warehouse, query).await?,
        ))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let ticket = query.as_any().encode_to_vec();
        let schema = query.into_builder().schema();
        flight_info(&schema, ticket, request.into_inner())
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(batch_stream(metadata::table_types(query)?))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let ticket = query.as_any().encode_to_vec();
        let schema = query.into_builder(&self.0.sql_info).schema();
        flight_info(&schema, ticket, request.into_inner())
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = query
            .into_builder(&self.0.sql_info)
            .build()
            .map_err(|e| Status::internal(format!("cannot build the SQL info: {e}")))?;
        Ok(batch_stream(batch))
    }

    async fn do_get_fallback(
        &self,
        _request: Request<Ticket>,
        message: Any,
    ) -> Result<Response<DoGetStream>, Status> {
        Err(Status::unimplemented(format!(
            "this server does not answer {}",
            message.type_url
        )))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}
